# The build's summary lines, which ./dev shows from pip's log: what was built and why, and why a build stopped.
function(swish_note msg)
  message(NOTICE "[torchtrt_swish build] ${msg}")
endfunction()

# The reason on one line of its own (CMake rewraps a FATAL_ERROR's text over several).
function(swish_fail msg)
  message(NOTICE "[torchtrt_swish build] ${msg}")
  message(FATAL_ERROR "the build stopped: see the [torchtrt_swish build] line above")
endfunction()
