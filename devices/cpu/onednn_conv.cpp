#include "devices/cpu/onednn_conv.hpp"

#include "graph/graph.hpp"
#include "graph/mixed_precision.hpp"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace actorflow {

namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

/// Everything a pass's primitives depend on.
using conv_key = std::array<std::int64_t, 15>;

conv_key key_of(onednn_conv_pass pass, const conv_sizes& s, bool bf16) {
  auto& g = s.g;
  return {static_cast<std::int64_t>(pass), bf16 ? 1 : 0, s.batch, s.channels, s.filters, g.in_h, g.in_w,
          g.k_h, g.k_w, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.out_h, g.out_w};
}

/// A reorder between the kernel's plain tensor and the primitive's layout; empty when they agree.
struct layout_change {
  std::optional<dnnl::reorder> reorder;
  dnnl::memory::desc plain, wanted;
};

layout_change make_layout_change(const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                                 const dnnl::engine& engine, bool into_plain) {
  layout_change c{std::nullopt, plain, wanted};
  if (plain != wanted) {
    const auto& from = into_plain ? wanted : plain;
    const auto& to = into_plain ? plain : wanted;
    c.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to));
  }
  return c;
}

/// Says on stderr, once per process and only under ACTORFLOW_VERBOSE=1, why oneDNN declined.
void say_once(const char* what, const char* which = "a convolution",
              const char* instead = "im2col + GEMM") {
  static std::atomic<bool> said{false};
  const char* verbose = std::getenv("ACTORFLOW_VERBOSE");
  if (verbose != nullptr && std::strcmp(verbose, "1") == 0 && !said.exchange(true))
    std::fprintf(stderr, "cpu: oneDNN cannot run %s (%s); %s instead\n", which, what, instead);
}

/// One pass of one shape: the primitive on its preferred layouts, the reorders around it, and
/// the scratchpad size it asks for (the caller provides it: a user scratchpad keeps concurrent
/// runs of the same primitive apart).
struct conv_plan {
  dnnl::primitive primitive;
  layout_change first, second, result; // the two inputs and the output, in argument order
  int first_arg = 0, second_arg = 0, result_arg = 0;
  std::size_t scratchpad_bytes = 0;
};

class engine_and_cache {
public:
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};

  /// The plan for `s`, made at the first call; null when oneDNN cannot run it.
  std::shared_ptr<const conv_plan> plan(onednn_conv_pass pass, const conv_sizes& s, bool bf16) {
    auto key = key_of(pass, s, bf16);
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (auto it = plans_.find(key); it != plans_.end())
        return it->second;
    }
    // Made outside the lock (it takes tens of microseconds); a racing maker's plan is as good.
    // A shape oneDNN refuses is remembered as null: asked again, it falls back at once.
    std::shared_ptr<const conv_plan> made;
    try {
      made = std::make_shared<const conv_plan>(make_plan(pass, s, bf16));
    } catch (const dnnl::error& e) {
      say_once(e.what());
    }
    std::lock_guard<std::mutex> guard{mutex_};
    // Bounded: a graph has few convolution shapes; one with many (varying batch) starts again.
    if (plans_.size() >= 256)
      plans_.clear();
    return plans_.emplace(key, std::move(made)).first->second;
  }

private:
  conv_plan make_plan(onednn_conv_pass pass, const conv_sizes& s, bool bf16) const {
    auto& g = s.g;
    auto f32 = dnnl::memory::data_type::f32;
    // Mixed precision: the primitive reads bf16 (the reorders in convert) and accumulates and
    // writes float32, so every result (y, dx, dfilter) stays float32.
    auto in = bf16 ? dnnl::memory::data_type::bf16 : f32;
    dims x_dims{s.batch, s.channels, g.in_h, g.in_w};
    dims w_dims{s.filters, s.channels, g.k_h, g.k_w};
    dims y_dims{s.batch, s.filters, g.out_h, g.out_w};
    dims strides{g.stride_h, g.stride_w}, pad_l{g.pad_top, g.pad_left};
    // TensorFlow's padding puts any odd pixel after; a VALID window that leaves input over
    // pads nothing (the output size rounds down alike).
    dims pad_r{std::max<std::int64_t>(0, (g.out_h - 1) * g.stride_h + g.k_h - g.in_h - g.pad_top),
               std::max<std::int64_t>(0, (g.out_w - 1) * g.stride_w + g.k_w - g.in_w - g.pad_left)};
    dnnl::memory::desc x_plain(x_dims, f32, tag::nhwc), w_plain(w_dims, f32, tag::hwio),
      y_plain(y_dims, f32, tag::nhwc);
    // The desc of each tensor as the pass reads (bf16 under mixed precision) or writes it.
    bool reads_x = pass != onednn_conv_pass::input, reads_w = pass != onednn_conv_pass::filter;
    dnnl::memory::desc x_any(x_dims, reads_x ? in : f32, tag::any),
      w_any(w_dims, reads_w ? in : f32, tag::any),
      y_any(y_dims, pass == onednn_conv_pass::forward ? f32 : in, tag::any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto algo = dnnl::algorithm::convolution_direct;
    // The forward pass, or the backward passes' hint, on the operand types they read.
    dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, algo, dnnl::memory::desc(x_dims, in, tag::any),
       dnnl::memory::desc(w_dims, in, tag::any), y_any, strides, pad_l, pad_r},
      attr, engine);
    conv_plan p;
    if (pass == onednn_conv_pass::forward) {
      p.primitive = dnnl::convolution_forward(forward);
      p.first = make_layout_change(x_plain, forward.src_desc(), engine, false);
      p.second = make_layout_change(w_plain, forward.weights_desc(), engine, false);
      p.result = make_layout_change(y_plain, forward.dst_desc(), engine, true);
      p.first_arg = DNNL_ARG_SRC, p.second_arg = DNNL_ARG_WEIGHTS, p.result_arg = DNNL_ARG_DST;
      p.scratchpad_bytes = forward.scratchpad_desc().get_size();
    } else if (pass == onednn_conv_pass::input) {
      dnnl::convolution_backward_data::primitive_desc input(
        {algo, x_any, w_any, y_any, strides, pad_l, pad_r}, attr, engine, forward);
      p.primitive = dnnl::convolution_backward_data(input);
      p.first = make_layout_change(w_plain, input.weights_desc(), engine, false);
      p.second = make_layout_change(y_plain, input.diff_dst_desc(), engine, false);
      p.result = make_layout_change(x_plain, input.diff_src_desc(), engine, true);
      p.first_arg = DNNL_ARG_WEIGHTS, p.second_arg = DNNL_ARG_DIFF_DST,
      p.result_arg = DNNL_ARG_DIFF_SRC;
      p.scratchpad_bytes = input.scratchpad_desc().get_size();
    } else {
      dnnl::convolution_backward_weights::primitive_desc filter(
        {algo, x_any, w_any, y_any, strides, pad_l, pad_r}, attr, engine, forward);
      p.primitive = dnnl::convolution_backward_weights(filter);
      p.first = make_layout_change(x_plain, filter.src_desc(), engine, false);
      p.second = make_layout_change(y_plain, filter.diff_dst_desc(), engine, false);
      p.result = make_layout_change(w_plain, filter.diff_weights_desc(), engine, true);
      p.first_arg = DNNL_ARG_SRC, p.second_arg = DNNL_ARG_DIFF_DST,
      p.result_arg = DNNL_ARG_DIFF_WEIGHTS;
      p.scratchpad_bytes = filter.scratchpad_desc().get_size();
    }
    return p;
  }

  std::mutex mutex_;
  std::map<conv_key, std::shared_ptr<const conv_plan>> plans_;
};

engine_and_cache& onednn() {
  // Never destroyed: kernels in static objects may run after main's locals are gone.
  static auto* state = new engine_and_cache;
  return *state;
}

/// A cache line: scratch aligned as oneDNN's own allocations are.
struct alignas(64) cache_line {
  char bytes[64];
};

/// Scratch of this thread, grown as needed and kept (a fresh buffer per call would be faulted
/// in every time): slots 0-2 the reordered tensors, 3 the primitive's scratchpad.
char* scratch(int slot, std::size_t bytes) {
  thread_local std::array<std::vector<cache_line>, 4> mine;
  auto& v = mine[static_cast<std::size_t>(slot)];
  auto lines = (bytes + sizeof(cache_line) - 1) / sizeof(cache_line);
  if (v.size() < lines)
    v.resize(lines);
  return v.data()->bytes;
}

} // namespace

bool onednn_conv_wanted() {
  const char* choice = std::getenv("ACTORFLOW_CPU_CONV");
  return choice == nullptr || std::strcmp(choice, "gemm") != 0;
}

bool onednn_convolution(onednn_conv_pass pass, const conv_sizes& s, const float* x,
                        const float* filter, const float* dy, float* out, bool bf16) {
  // The input gradient of an image with few channels: oneDNN pads channels to its 16-wide blocks
  // and ran the CNN's first layer (1 channel) at 0.4x im2col + GEMM, where 16 channels ran at 1.9x
  // (bench_cpu_gemm_libraries). Training never asks for it on the images themselves.
  if (pass == onednn_conv_pass::input && s.channels < 4)
    return false;
  // bf16 on AMX pairs channels into 16-wide tile rows: the CNN's first layer (1 channel) ran its
  // forward pass at 0.65x and its filter gradient at 0.22x of float32 there, where 16 channels
  // ran at 1.5x / 1.7x (input gradient) / 1.0x (filter): few channels stay float32.
  if (s.channels < 16)
    bf16 = false;
  // oneDNN's OpenMP runtime takes omp_get_max_threads() of the calling thread, and some of its
  // primitives (the bf16 reorders and matmuls) fix their thread count when made: so it is set
  // before the plan is made (made at 2, a bf16 MLP's reorders took 10 ms instead of 0.08).
  // One: OpenMP's teams spin at their barriers, and on 2 shared cores (other processes, our own inter-op and
  // BLAS threads) every OpenMP library measured here fell to under 0.1x of its 1-thread rate
  // at 2 threads, where OpenBLAS's threads kept theirs; the CNN's convolutions are small, and
  // the im2col + GEMM path they replace ran at 1 thread in the CNN benchmark too.
  omp_set_num_threads(1);
  try {
    auto& state = onednn();
    auto plan = state.plan(pass, s, bf16);
    if (plan == nullptr)
      return false;
    dnnl::stream stream(state.engine);
    const float* first = pass == onednn_conv_pass::input ? filter : x;
    const float* second = pass == onednn_conv_pass::forward ? filter : dy;
    auto bring_in = [&](const layout_change& c, const float* data, int slot) {
      dnnl::memory plain(c.plain, state.engine, const_cast<float*>(data));
      if (!c.reorder)
        return plain;
      dnnl::memory wanted(c.wanted, state.engine, scratch(slot, c.wanted.get_size()));
      c.reorder->execute(stream, plain, wanted);
      return wanted;
    };
    auto a = bring_in(plan->first, first, 0);
    auto b = bring_in(plan->second, second, 1);
    dnnl::memory plain_out(plan->result.plain, state.engine, out);
    dnnl::memory result = plan->result.reorder
                            ? dnnl::memory(plan->result.wanted, state.engine,
                                           scratch(2, plan->result.wanted.get_size()))
                            : plain_out;
    std::unordered_map<int, dnnl::memory> args{{plan->first_arg, a}, {plan->second_arg, b},
                                               {plan->result_arg, result}};
    if (plan->scratchpad_bytes > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(dnnl::memory::desc({static_cast<std::int64_t>(plan->scratchpad_bytes)},
                                                   dnnl::memory::data_type::u8, tag::x),
                                state.engine, scratch(3, plan->scratchpad_bytes)));
    plan->primitive.execute(stream, args);
    if (plan->result.reorder)
      plan->result.reorder->execute(stream, result, plain_out);
    stream.wait();
    return true;
  } catch (const dnnl::error& e) {
    say_once(e.what());
    return false;
  }
}

std::string onednn_version() {
  auto v = dnnl::version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

// --- bf16 matmul (mixed precision) ----------------------------------------------------------

namespace {

/// Everything a matmul plan depends on: transposes, sizes, row lengths, bias, Relu.
using matmul_key = std::array<std::int64_t, 9>;

/// The primitive (bf16 operands, float32 accumulation and destination, the bias and Relu as
/// post-ops) and the reorders that convert the float32 operands into the layouts it wants.
struct matmul_plan {
  dnnl::matmul primitive;
  layout_change a, b;
  dnnl::memory::desc c, bias;
  std::size_t scratchpad_bytes = 0;
};

class matmul_cache {
public:
  std::shared_ptr<const matmul_plan> plan(const matmul_key& key) {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (auto it = plans_.find(key); it != plans_.end())
        return it->second;
    }
    // As the convolutions' cache: made outside the lock, refusals remembered as null.
    std::shared_ptr<const matmul_plan> made;
    try {
      made = std::make_shared<const matmul_plan>(make_plan(key));
    } catch (const dnnl::error& e) {
      say_once(e.what(), "a bf16 matmul", "float32 on the BLAS");
    }
    std::lock_guard<std::mutex> guard{mutex_};
    if (plans_.size() >= 256)
      plans_.clear();
    return plans_.emplace(key, std::move(made)).first->second;
  }

private:
  static matmul_plan make_plan(const matmul_key& key) {
    auto [transpose_a, transpose_b, m, n, k, lda, ldb, has_bias, relu] = key;
    const auto& engine = onednn().engine;
    auto f32 = dnnl::memory::data_type::f32, bf16 = dnnl::memory::data_type::bf16;
    // The float32 operands as stored: op(A)[m,k] is A's rows, or its columns when transposed.
    dnnl::memory::desc a_plain({m, k}, f32, transpose_a ? dims{1, lda} : dims{lda, 1});
    dnnl::memory::desc b_plain({k, n}, f32, transpose_b ? dims{1, ldb} : dims{ldb, 1});
    dnnl::memory::desc c_plain({m, n}, f32, tag::ab);
    dnnl::memory::desc bias_desc = has_bias != 0 ? dnnl::memory::desc({1, n}, f32, tag::ab)
                                                 : dnnl::memory::desc();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (relu != 0) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(
      {dnnl::memory::desc({m, k}, bf16, tag::any), dnnl::memory::desc({k, n}, bf16, tag::any),
       bias_desc, c_plain},
      attr, engine);
    if (pd.dst_desc() != c_plain)
      throw dnnl::error(dnnl_unimplemented, "the bf16 matmul wants another output layout");
    return {dnnl::matmul(pd), make_layout_change(a_plain, pd.src_desc(), engine, false),
            make_layout_change(b_plain, pd.weights_desc(), engine, false), c_plain, bias_desc,
            pd.scratchpad_desc().get_size()};
  }

  std::mutex mutex_;
  std::map<matmul_key, std::shared_ptr<const matmul_plan>> plans_;
};

matmul_cache& matmuls() {
  static auto* cache = new matmul_cache; // never destroyed, as onednn()
  return *cache;
}

} // namespace

bool onednn_bf16_available() {
  static const bool available = [] {
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    // The ISA values are masks: AMX includes every bit of AVX-512 BF16.
    bool has = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    if (!has)
      std::fprintf(stderr, "mixed precision: oneDNN finds no bf16 instructions on this CPU "
                           "(ISA mask 0x%x); MatMul and convolutions compute in float32\n", isa);
    return has;
  }();
  return available;
}

bool onednn_bf16_wanted(const node& n) {
  return n.attr_or<std::string>(mixed_precision_attr, "") == "bfloat16" && onednn_bf16_available();
}

bool onednn_matmul_bf16(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                        std::int64_t k, const float* a, std::int64_t lda, const float* b,
                        std::int64_t ldb, const float* bias, bool relu, float* c) {
  omp_set_num_threads(1); // before the plan is made, as the convolutions (onednn_convolution)
  try {
    auto plan = matmuls().plan({transpose_a ? 1 : 0, transpose_b ? 1 : 0, m, n, k, lda, ldb,
                                bias != nullptr ? 1 : 0, relu ? 1 : 0});
    if (plan == nullptr)
      return false;
    auto& engine = onednn().engine;
    dnnl::stream stream(engine);
    auto bring_in = [&](const layout_change& change, const float* data, int slot) {
      dnnl::memory plain(change.plain, engine, const_cast<float*>(data));
      dnnl::memory wanted(change.wanted, engine, scratch(slot, change.wanted.get_size()));
      change.reorder->execute(stream, plain, wanted); // always one: it converts to bf16
      return wanted;
    };
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, bring_in(plan->a, a, 0)},
                                               {DNNL_ARG_WEIGHTS, bring_in(plan->b, b, 1)},
                                               {DNNL_ARG_DST, dnnl::memory(plan->c, engine, c)}};
    if (bias != nullptr)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(plan->bias, engine, const_cast<float*>(bias)));
    if (plan->scratchpad_bytes > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(dnnl::memory::desc({static_cast<std::int64_t>(plan->scratchpad_bytes)},
                                                   dnnl::memory::data_type::u8, tag::x),
                                engine, scratch(3, plan->scratchpad_bytes)));
    plan->primitive.execute(stream, args);
    stream.wait();
    return true;
  } catch (const dnnl::error& e) {
    say_once(e.what(), "a bf16 matmul", "float32 on the BLAS");
    return false;
  }
}

} // namespace actorflow
