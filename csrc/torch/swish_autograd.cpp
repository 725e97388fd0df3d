// Autograd of torchtrt_swish::swish and swish_backward on the Autograd dispatch key, the way PyTorch's generated
// VariableType kernels do it for its own ops: a graph node only when an input requires grad, the kernel below
// autograd, and forward-mode AD (tangents of inputs -> tangent of the output, in differentiable ATen ops).
//
// In C++ rather than torch.library.register_autograd: a Python autograd kernel runs on every call outside
// inference mode (host time on every call, also when nothing requires grad), and its generated autograd.Function
// supports neither forward AD nor the torch.func transforms. Being plain autograd, this works under functorch
// (grad, jvp, jacrev, jacfwd, hessian; vmap rules live in ops.py), torch.compile / torch.export (AOTAutograd traces
// through it) and in TorchScript.
//
// Compiled autograd (torch._dynamo.config.compiled_autograd) walks the graph nodes of a backward itself and asks each
// for compiled_args (its saved tensors, lifted to graph inputs) and apply_with_saved (its computation, proxied into the
// graph). Both nodes answer the way torch's generated nodes (SiluBackward0 ...) do in torch 2.11-2.14: the backward is
// one functional C++ function of (grads, needs_input_grad, saved tensors), bound once by name into
// torch._dynamo.compiled_autograd.ops and recorded as one call; dynamo and AOTAutograd then trace through it, so the
// graph holds torchtrt_swish::swish_backward itself, which inductor decomposes and fuses (ops.py).
//
// With f(x) = x * sigmoid(x), s = sigmoid(x):
//   swish:          y = f(x) + b              dy = f'(x) dx + db (broadcast)
//   swish_backward: dx = g f'(x), dbias = sum_to(g, bias.shape)
//                   d(dx) = f'(x) dg + g f''(x) dx_in, d(dbias) = sum_to(dg)
//   f' = s (1 + x (1 - s)), f'' = s (1 - s) (2 + x (1 - 2 s)).
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/sigmoid.h>
#include <c10/core/DispatchKeySet.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/library.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

namespace torchtrt_swish {
namespace {

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;
namespace ca = torch::dynamo::autograd;

//! Which of a node's two inputs the running backward wants a grad for.
using NeedsGrad = std::array<bool, 2>;

// torch >= 2.13 holds graph nodes in c10::intrusive_ptr, earlier releases in std::shared_ptr with torch's deleteNode
// (it frees long graphs without deep recursion); Edge::function has the type this torch uses.
using NodePtr = decltype(torch::autograd::Edge::function);

template <typename T>
auto makeNode()
{
    if constexpr (std::is_same_v<NodePtr, std::shared_ptr<Node>>)
    {
        // Unqualified: found by argument-dependent lookup in torch::autograd, only on the torch versions that have it.
        return std::shared_ptr<T>(new T(), [](T* n) { deleteNode(n); });
    }
    else
    {
        return c10::make_intrusive<T>();
    }
}

using SwishFn = at::Tensor(at::Tensor const&, at::Tensor const&);
using SwishBackwardFn = std::tuple<at::Tensor, at::Tensor>(at::Tensor const&, at::Tensor const&, at::Tensor const&);

c10::TypedOperatorHandle<SwishFn> const& swishOp()
{
    static auto const op = c10::Dispatcher::singleton().findSchemaOrThrow("torchtrt_swish::swish", "").typed<SwishFn>();
    return op;
}

c10::TypedOperatorHandle<SwishBackwardFn> const& swishBackwardOp()
{
    static auto const op
        = c10::Dispatcher::singleton().findSchemaOrThrow("torchtrt_swish::swish_backward", "").typed<SwishBackwardFn>();
    return op;
}

//! The forward-mode tangent of t at level 0 (functorch runs each of its levels as level 0 of its own wrappers).
at::Tensor tangentOf(at::Tensor const& t)
{
    return t.defined() ? t._fw_grad(/*level=*/0) : at::Tensor();
}

//! t without its level-0 tangent, as ATen's formulas use primals (a tangent must not carry a tangent itself).
at::Tensor primalOf(at::Tensor const& t)
{
    return t._fw_primal(/*level=*/0);
}

// The formulas use plain differentiable ops, not ATen's silu_backward: that op has no derivative of its own (ATen's
// silu switches to a composite formula when a graph is being built), and these results may be differentiated again
// in either mode (hessian, jacfwd of jacfwd, grad of jvp).

//! t in the kernels' compute type (fp32 for fp16 / bf16), so that each formula below rounds once to its output type.
at::Tensor opmath(at::Tensor const& t)
{
    auto const st = t.scalar_type();
    return st == at::kHalf || st == at::kBFloat16 ? t.to(at::kFloat) : t;
}

//! f'(x) for f(x) = x * sigmoid(x).
at::Tensor siluFirstDerivative(at::Tensor const& x)
{
    at::Tensor const s = at::sigmoid(x);
    return s * (1 + x * (1 - s));
}

//! f''(x) for f(x) = x * sigmoid(x).
at::Tensor siluSecondDerivative(at::Tensor const& x)
{
    at::Tensor const s = at::sigmoid(x);
    return s * (1 - s) * (2 + x * (1 - 2 * s));
}

//! (dx, dbias) of swish for the output's grad, through the op's own backward kernel; undefined where not needed.
variable_list swishGrads(variable_list const& grads, NeedsGrad needs, at::Tensor const& x, at::Tensor const& bias)
{
    variable_list out(2);
    if (!grads[0].defined() || !(needs[0] || needs[1]))
    {
        return out;
    }
    auto [dx, dbias] = swishBackwardOp().call(grads[0], x, bias);
    out[0] = needs[0] ? dx : at::Tensor();
    out[1] = needs[1] ? dbias : at::Tensor();
    return out;
}

//! (d grad, d x) of swish_backward for the grads of its (dx, dbias); bias only contributes its shape.
variable_list swishBackwardGrads(
    variable_list const& grads, NeedsGrad needs, at::Tensor const& grad, at::Tensor const& x)
{
    at::Tensor const& gDx = grads[0];
    at::Tensor const& gDbias = grads[1];
    variable_list out(2);
    if (!gDx.defined() && !gDbias.defined())
    {
        return out;
    }
    if (needs[0])
    {
        at::Tensor dGrad = gDx.defined() ? opmath(gDx) * siluFirstDerivative(opmath(x)) : at::Tensor();
        if (gDbias.defined())
        {
            at::Tensor const spread = gDbias.expand_symint(x.sym_sizes());
            dGrad = dGrad.defined() ? dGrad + opmath(spread) : spread;
        }
        out[0] = dGrad.to(x.scalar_type());
    }
    if (needs[1] && gDx.defined())
    {
        out[1] = (opmath(gDx) * opmath(grad) * siluSecondDerivative(opmath(x))).to(x.scalar_type());
    }
    return out;
}

// Compiled autograd hands a bound function its arguments as IValues: needs_input_grad, then the two saved tensors.
using GradsFn = variable_list(variable_list const&, NeedsGrad, at::Tensor const&, at::Tensor const&);

template <GradsFn* Fn>
variable_list gradsFromIValues(variable_list const& grads, torch::autograd::ivalue_list const& args)
{
    ca::PackedArgs packed(args);
    auto const needs = packed.unpack<NeedsGrad>();
    auto const a = packed.unpack<at::Tensor>();
    auto const b = packed.unpack<at::Tensor>();
    return Fn(grads, needs, a, b);
}

//! Records Fn(grads, needs, a, b) as one call in the compiled-autograd graph; a and b are the node's saved tensors,
//! already swapped for their graph proxies (SwapSavedVariables::before) by the caller.
template <GradsFn* Fn>
variable_list recordInCompiledAutograd(Node& node, ca::SwapSavedVariables& saved, std::string const& fnName,
    variable_list const& grads, at::Tensor const& a, at::Tensor const& b)
{
    auto const& py = ca::getPyCompilerInterface();
    // Bound once per process and function (binding a name twice is an error in torch._dynamo.compiled_autograd.ops);
    // is_traceable (the default) lets dynamo trace into it instead of running it eagerly behind a graph break.
    static bool const bound = [&] {
        std::vector<at::TypePtr> schema{ca::IValuePacker<NeedsGrad>::packed_type(),
            ca::IValuePacker<at::Tensor>::packed_type(), ca::IValuePacker<at::Tensor>::packed_type()};
        py->bind_function(saved.get_py_compiler(), fnName, gradsFromIValues<Fn>, std::move(schema));
        return true;
    }();
    (void) bound;
    ca::PackedArgs packed;
    packed.pack(NeedsGrad{node.task_should_compute_output(0), node.task_should_compute_output(1)});
    packed.pack(a);
    packed.pack(b);
    // The metadata of the next edges tells compiled autograd how many grads come back, and their shapes.
    auto const outputMetadata = ca::IValuePacker<std::vector<std::optional<torch::autograd::InputMetadata>>>::pack(
        ca::get_input_metadata(node.next_edges()));
    return py->call_function(saved.get_py_compiler(), "apply_functional", fnName, grads, packed.vec(), outputMetadata);
}

//! A grad node whose state is two saved inputs and whose backward is Fn(grads, needs, first, second). kName is the
//! node's name in autograd's messages, kOpsName the Python identifier compiled autograd binds Fn under (an attribute
//! of torch._dynamo.compiled_autograd.ops and a name in FX code).
template <GradsFn* Fn, char const* kName, char const* kOpsName>
struct TwoSavedNode final : Node
{
    SavedVariable first;
    SavedVariable second;

    //! A node saving (a, b) with edges to both when either requires grad, else null (no graph to build).
    static auto forInputs(at::Tensor const& a, at::Tensor const& b)
    {
        decltype(makeNode<TwoSavedNode>()) node;
        if (torch::autograd::compute_requires_grad(a, b))
        {
            node = makeNode<TwoSavedNode>();
            node->set_next_edges(torch::autograd::collect_next_edges(a, b));
            node->first = SavedVariable(a, /*is_output=*/false);
            node->second = SavedVariable(b, /*is_output=*/false);
        }
        return node;
    }

    variable_list apply(variable_list&& grads) override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        return Fn(grads, {task_should_compute_output(0), task_should_compute_output(1)}, first.unpack(),
            second.unpack());
    }

    std::string name() const override
    {
        return kName;
    }

    void release_variables() override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        first.reset_data();
        second.reset_data();
    }

    // The node's state is its two saved inputs; compiled autograd lifts them to graph inputs.
    void compiled_args(ca::CompiledNodeArgs& args) const override
    {
        args.collect(first, /*is_output=*/false);
        args.collect(second, /*is_output=*/false);
    }

    variable_list apply_with_saved(variable_list const& grads, ca::SwapSavedVariables& saved) override
    {
        saved.before(first);
        saved.before(second);
        auto out = recordInCompiledAutograd<Fn>(*this, saved, kOpsName, grads, first.unpack(), second.unpack());
        saved.after(first);
        saved.after(second);
        return out;
    }
};

constexpr char kSwishBackwardName[] = "torchtrt_swish::SwishBackward";
constexpr char kSwishBackwardOpsName[] = "torchtrt_swish_SwishBackward";
constexpr char kSwishBackwardBackwardName[] = "torchtrt_swish::SwishBackwardBackward";
constexpr char kSwishBackwardBackwardOpsName[] = "torchtrt_swish_SwishBackwardBackward";

//! Grad node of swish: saves (x, bias); (dx, dbias) from the output's grad.
using SwishBackwardNode = TwoSavedNode<swishGrads, kSwishBackwardName, kSwishBackwardOpsName>;
//! Grad node of swish_backward (double backward): saves (grad, x); grads of (grad, x).
using SwishBackwardBackwardNode
    = TwoSavedNode<swishBackwardGrads, kSwishBackwardBackwardName, kSwishBackwardBackwardOpsName>;

at::Tensor swishAutograd(c10::DispatchKeySet ks, at::Tensor const& x, at::Tensor const& bias)
{
    auto const node = SwishBackwardNode::forInputs(x, bias);
    at::Tensor y;
    {
        at::AutoDispatchBelowADInplaceOrView guard;
        y = swishOp().redispatch(ks & c10::after_autograd_keyset, x, bias);
    }
    if (node)
    {
        torch::autograd::set_history(y, NodePtr(node));
    }
    at::Tensor const xT = tangentOf(x);
    at::Tensor const bT = tangentOf(bias);
    if (xT.defined() || bT.defined())
    {
        at::Tensor yT;
        if (xT.defined())
        {
            yT = opmath(xT) * siluFirstDerivative(opmath(primalOf(x)));
            yT = (bT.defined() ? yT + opmath(bT) : yT).to(y.scalar_type());
        }
        else
        {
            yT = bT.expand_symint(y.sym_sizes());
        }
        y._set_fw_grad(yT, /*level=*/0, /*is_inplace_op=*/false);
    }
    return y;
}

std::tuple<at::Tensor, at::Tensor> swishBackwardAutograd(
    c10::DispatchKeySet ks, at::Tensor const& grad, at::Tensor const& x, at::Tensor const& bias)
{
    auto const node = SwishBackwardBackwardNode::forInputs(grad, x);
    at::Tensor dx;
    at::Tensor dbias;
    {
        at::AutoDispatchBelowADInplaceOrView guard;
        std::tie(dx, dbias) = swishBackwardOp().redispatch(ks & c10::after_autograd_keyset, grad, x, bias);
    }
    if (node)
    {
        NodePtr const base(node);
        torch::autograd::set_history(dx, base);
        torch::autograd::set_history(dbias, base);
    }
    at::Tensor const gT = tangentOf(grad);
    at::Tensor const xT = tangentOf(x);
    if (gT.defined() || xT.defined())
    {
        at::Tensor const xP = opmath(primalOf(x));
        at::Tensor dxT = gT.defined() ? opmath(gT) * siluFirstDerivative(xP) : at::Tensor();
        if (xT.defined())
        {
            at::Tensor const term = opmath(xT) * opmath(primalOf(grad)) * siluSecondDerivative(xP);
            dxT = dxT.defined() ? dxT + term : term;
        }
        dx._set_fw_grad(dxT.to(dx.scalar_type()), /*level=*/0, /*is_inplace_op=*/false);
        if (gT.defined())
        {
            at::Tensor const dbiasT = at::sum_to(gT, bias.sym_sizes(), /*always_return_non_view=*/true);
            dbias._set_fw_grad(dbiasT, /*level=*/0, /*is_inplace_op=*/false);
        }
    }
    return {dx, dbias};
}

} // namespace

TORCH_LIBRARY_IMPL(torchtrt_swish, Autograd, m)
{
    m.impl("swish", &swishAutograd);
    m.impl("swish_backward", &swishBackwardAutograd);
}

} // namespace torchtrt_swish
