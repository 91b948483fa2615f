# Runs the compiler on wrong_message.cpp: once as is (must compile), then once per WRONG_*
# macro (must fail for the right reason). Variables: CXX, SOURCE, FLAGS (a ;-list of -I/-D).
set(common ${FLAGS} -std=c++17 -fsyntax-only ${SOURCE})
execute_process(COMMAND ${CXX} ${common} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the well-typed messages failed to compile:\n${err}")
endif()
foreach(case WRONG_MASTER_MESSAGE WRONG_DEVICE_MESSAGE WRONG_SHARD_MESSAGE WRONG_MASTER_IS_NOT_A_TASK)
  execute_process(COMMAND ${CXX} ${common} -D${case} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${case}: a wrong message compiled")
  endif()
  if(NOT err MATCHES "receiver does not accept given message|Cannot assign incompatible handle|struct caf::response_type<")
    message(FATAL_ERROR "${case}: failed to compile, but not because of the typed protocol:\n${err}")
  endif()
  message(STATUS "${case}: refused at compile time, as it should be")
endforeach()
