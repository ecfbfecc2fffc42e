# Installs ctnn from SOURCE into a scratch prefix, then configures, builds and
# runs two consumer projects (each also with ctnn_compiled_kernels): one with find_package(ctnn CONFIG) against the
# installed copy, one with add_subdirectory(SOURCE).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGV}\n${out}\n${err}")
  endif()
endfunction()
# The consumers test the packaging, not speed: -O0 (the Release build type otherwise) builds
# them in about a third of the CPU time of -O3.
set(gen -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG")
run(${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/ctnn-build ${gen} -DCTNN_BUILD_TESTS=OFF -DCTNN_BUILD_EXAMPLES=OFF -DCTNN_CUDA=OFF
    -DCMAKE_INSTALL_PREFIX=${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${WORK}/ctnn-build)
if(NOT EXISTS ${WORK}/prefix/include/ctnn/ctnn.hpp)
  message(FATAL_ERROR "install did not place include/ctnn/ctnn.hpp")
endif()

run(${CMAKE_COMMAND} -S ${SOURCE}/tests/package/find_package -B ${WORK}/fp ${gen} -DCMAKE_PREFIX_PATH=${WORK}/prefix)
run(${CMAKE_COMMAND} --build ${WORK}/fp)
run(${WORK}/fp/consumer)
run(${WORK}/fp/consumer_compiled)
run(${WORK}/fp/consumer_xtensor)
if(EXISTS ${WORK}/fp/consumer_mpi)
  run(${WORK}/fp/consumer_mpi)
endif()

run(${CMAKE_COMMAND} -S ${SOURCE}/tests/package/add_subdirectory -B ${WORK}/as ${gen} -DCTNN_SOURCE=${SOURCE})
run(${CMAKE_COMMAND} --build ${WORK}/as)
run(${WORK}/as/consumer)
run(${WORK}/as/consumer_compiled)
run(${WORK}/as/consumer_xtensor)
message(STATUS "both consumers (and their xtensor programs) built and ran")
