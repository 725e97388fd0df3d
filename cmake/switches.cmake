# The build's on/off switches read from the environment (TORCHTRT_SWISH_FORCE_CPU, TORCHTRT_SWISH_SKIP_PLUGIN,
# TORCHTRT_SWISH_NO_FETCH), with CMake's and the shell's usual spellings: a value read as "off" by mistake would
# build something other than what was asked, so a value that is neither stops the configure naming it.

# out: ON for 1, ON, YES, Y, TRUE; OFF for 0, OFF, NO, N, FALSE, empty or unset (any case, surrounding blanks
# ignored); anything else is an error naming the variable and its value.
function(swish_env_switch name out)
  string(STRIP "$ENV{${name}}" value)
  string(TOUPPER "${value}" upper)
  if(upper MATCHES "^(1|ON|YES|Y|TRUE)$")
    set(${out} ON PARENT_SCOPE)
  elseif(upper MATCHES "^(0|OFF|NO|N|FALSE|)$")
    set(${out} OFF PARENT_SCOPE)
  else()
    swish_fail("${name}='$ENV{${name}}' is not an on/off value: use 1, ON, YES or TRUE to switch it on, 0, OFF, NO, FALSE or nothing to leave it off")
  endif()
endfunction()
