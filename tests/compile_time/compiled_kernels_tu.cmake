# Compiles compiled_kernels_tu.cpp (a network and a small CNN trained by fit, a summary, an IDX
# read) twice with CXX and FLAGS: header-only, where the object must define the default
# architecture's GEMM kernels (simd::run_plan, dot_nt, the micro-kernels the network's own
# code calls: its 10-output weight gradient's, its packed product's), the thread pool's
# run_tasks, a cold error path, the CNN's batch normalization gradient and Winograd input
# transform; and with
# -DCTNN_COMPILED_KERNELS, where it must reference them, the outlined functions of
# core/separate.hpp (find_parameter_in: the search of a model's table of parameter buffers),
# the element-wise map<> instances of compiled_kernels.hpp (Adam's update,
# relu's backward), the fused MLP's passes over the network's description (fused::forward_n,
# fused::backward_n) and its per-layer entries (fused::rule_fns: tile_product, backward_layer, absent),
# dropout's name and error paths (detail::dropout_name, throw_dropout_rate,
# kernels::cpu::throw_dropout_rate_range; throw_dropout_no_generator absent only),
# the Fashion-MNIST dataset's cursor::next and open, first_non_finite and the accuracy's count
# (CTNN_OUTLINE), the products' entry simd_gemm_epilogue (and pack_panels, narrow_weights_gradient: absent),
# the layers' bias gradient column_sum_n, evaluate's loop (evaluate_batches),
# the CNN's max pooling, batch normalization and Winograd transforms over a run-time geometry
# (*_n; their compile-time bodies absent), fit's epoch loop (train/fit_loop.hpp: fit_epochs, around
# the network's fit_session_of), the initializers' draws (fill_uniform<float>) (nm: U) and define none of them (nor a map's task, thread_pool::call<map<...>>),
# so that an edit of such a program does not generate their code again (cmake/ctnn_compiled_kernels.cmake). Needs NM.
function(compile out)
  separate_arguments(flags UNIX_COMMAND "${FLAGS}")
  execute_process(COMMAND ${CXX} ${flags} ${ARGN} -I${INCLUDE} -c ${SOURCE} -o ${out}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "compiling ${SOURCE} ${ARGN} failed:\n${err}")
  endif()
  execute_process(COMMAND ${NM} -C ${out} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${out} failed")
  endif()
  set(syms "${syms}" PARENT_SCOPE)
endfunction()
file(MAKE_DIRECTORY ${WORK})
# header-only, these must be defined in the object (out of line: not inlined into their callers; g++ gives
# the micro-kernels local symbols, t); header-only, throw_non_finite_parameter is a
# function template of nothing (CTNN_LAZY, core/separate.hpp: throw_non_finite_parameter<0>(...))
set(outlined "simd::run_plan<" "simd::dot_nt<" "simd::micro<" "thread_pool::run_tasks\\("
    "detail::throw_non_finite_parameter(<0>)?\\(" "detail::batch_norm_backward_c<" "detail::winograd_input_of<"
    "cpu::throw_dropout_rate_range\\(")
# with CTNN_COMPILED_KERNELS, none of these may be defined, and the first ones must be referenced
# (the micro-kernels only need be absent: since the fused small MLP's per-layer bodies are in the
# compiled part, whether the program's own code still calls one depends on the architecture and the
# optimization level: clang 19 at -O0 for x86-64-v3 calls none; run_plan, dot_nt and plan_gemm too:
# since the products' entry simd_gemm_epilogue is in the compiled part, they are called from there)
set(outlined_referenced ${outlined})
list(REMOVE_ITEM outlined_referenced "simd::micro<" "simd::run_plan<" "simd::dot_nt<" "detail::batch_norm_backward_c<"
     "detail::winograd_input_of<")
set(referenced ${outlined_referenced} "detail::fit_epochs\\(" "detail::fill_uniform<float>\\(" "history::~history\\(" "logs::set\\(" "detail::print_summary\\("
    "data::read_idx\\(" "io::read_weights_file\\(" "history::epochs\\(" "detail::throw_in_memory_sizes\\(" "detail::throw_sparse_label_out_of_range\\("
    "thread_pool::global\\(\\)" "cpu::map<[^\n]*adam_update<float>" "cpu::map<[^\n]*backward_of<ctnn::fn::relu_fn>"
    "fused::forward_n<" "fused::backward_n<" "fused::rule_fns<[^\n]*relu_fn>::product\\("
    "fused::rule_fns<[^\n]*identity_fn>::backward\\(" "detail::dropout_name\\(" "detail::throw_dropout_rate\\("
    "cpu::column_sum_n<" "detail::evaluate_batches\\(" "shape<28ul, 28ul>, ctnn::sparse_labels, float>::cursor::next\\("
    "shape<28ul, 28ul>, ctnn::sparse_labels, float>::open\\("
    "detail::first_non_finite<float>\\(" "detail::sparse_hits<float>\\(" "cpu::simd_gemm_epilogue<"
    "detail::find_parameter_in\\(" "cpu::max_pool_forward_n<" "cpu::max_pool_backward_n<" "cpu::batch_norm_forward_n<" "cpu::batch_norm_backward_n<"
    "cpu::winograd_filters_n<" "cpu::winograd_input_n<" "cpu::winograd_output_n<" "cpu::winograd_grad_tiles_n<"
    "cpu::winograd_grad_output_n<")
# (throw_dropout_no_generator: absent only, its call is gone where a model's pass names its generator)
set(absent ${referenced} "detail::throw_dropout_no_generator\\(" "fused::tile_product<" "fused::backward_layer<" "history::append_epoch\\(" "detail::exception_text\\(" "detail::throw_fit_no_batch\\(" "simd::micro<" "simd::run_plan<" "simd::dot_nt<" "plan_gemm<" "detail::summary_[a-z_]+[<(]" "simd::gemv<" "detail::gunzip\\(" "data::parse_idx\\(" "io::write_file_atomically\\("
    "make_gemm_plan<" "simd::packed_product<" "simd::pack_panels<" "simd::narrow_weights_gradient" "thread_pool::loop\\(" "thread_pool::~thread_pool\\("
    "detail::max_pool_forward_simd<" "detail::max_pool_backward_simd<" "detail::max_pool_backward_scalar_of<"
    "detail::batch_norm_forward_c<" "detail::batch_norm_backward_c<" "detail::winograd_filters_of<"
    "detail::winograd_input_of<" "detail::winograd_output_of<" "detail::winograd_grad_tiles_of<"
    "detail::winograd_grad_output_of<" "detail::winograd4_filters_of<" "detail::winograd4_input_of<"
    "detail::winograd4_output_of<" "detail::winograd4_grad_tiles_of<" "detail::winograd4_grad_output_of<")
# expect(WHAT SYMBOL_TYPES SHOULD_MATCH KIND...): fails with WHAT unless every KIND has (SHOULD_MATCH) or
# has not (NOT) a symbol of one of SYMBOL_TYPES (nm's letters) in the last compile's object.
function(expect what types should)
  foreach(k IN LISTS ARGN)
    string(REGEX MATCH " [${types}] [^\n]*${k}[^\n]*" found "${syms}")
    if(should AND NOT found)
      message(FATAL_ERROR "${what} ${k}...")
    elseif(NOT should AND found)
      message(FATAL_ERROR "${what}${found}")
    endif()
  endforeach()
endfunction()
compile(${WORK}/header_only.o)
expect("header-only, the object defines (the check below proves nothing without it) no" TWt ON ${outlined})
compile(${WORK}/compiled.o -DCTNN_COMPILED_KERNELS)
expect("with CTNN_COMPILED_KERNELS the object still defines" TWt OFF ${absent})
expect("with CTNN_COMPILED_KERNELS the object references no" U ON ${referenced})
message(STATUS "header-only: defines the kernels; CTNN_COMPILED_KERNELS: references them only")
