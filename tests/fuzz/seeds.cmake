# Assembles the seed corpora in OUT/<target>/ (cmake -P; see CMakeLists.txt).
file(REMOVE_RECURSE ${OUT})
foreach(target ${TARGETS})
  file(MAKE_DIRECTORY ${OUT}/${target})
  file(GLOB files ${SOURCE}/tests/fuzz/corpus/${target}/*)
  foreach(file ${files})
    get_filename_component(name ${file} NAME)
    if(name MATCHES "\\.txtpb$")
      execute_process(
        COMMAND ${PROTOC} --proto_path=${SOURCE} --proto_path=${SOURCE}/proto
                --encode=phalanx.fuzz.Session ${SOURCE}/tests/fuzz/session.proto
        INPUT_FILE ${file} OUTPUT_FILE ${OUT}/${target}/${name}.bin
        RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${file}: protoc --encode failed")
      endif()
    else()
      file(COPY ${file} DESTINATION ${OUT}/${target})
    endif()
  endforeach()
endforeach()
file(COPY ${SOURCE}/deploy/config.json DESTINATION ${OUT}/config_json_fuzzer)
file(COPY ${SOURCE}/deploy/fleet.json DESTINATION ${OUT}/fleet_json_fuzzer)
file(COPY ${SOURCE}/deploy/queues.json DESTINATION ${OUT}/queues_json_fuzzer)
execute_process(COMMAND ${MAKE_SEEDS} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_seeds failed")
endif()
