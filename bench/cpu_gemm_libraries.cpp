// The CPU math libraries side by side in one run, to choose what actorflow's CPU kernels call
// (docs/devices.md "Which library the CPU kernels call"):
// - GEMM at 1 and 2 threads, 1024^3 and the MLP's step (784-256-128-10, batch 128, forward and
//   gradient products with their transposes): OpenBLAS (cblas_sgemm, the kernels
//   blas_kernels() chose), BLIS (bli_sgemm, loaded with dlopen), oneDNN (dnnl_sgemm and the
//   matmul primitive).
// - The CNN's two convolutions (apps/train/models.cpp: 32x28x28x1 * 5x5x1x16 and
//   32x12x12x16 * 5x5x16x32, VALID, NHWC), forward and both backprops, at 1 thread: actorflow's
//   CPU kernel forced to im2col + GEMM (ACTORFLOW_CPU_CONV=gemm), the kernel as it is by
//   default, and oneDNN's convolution primitives on plain NHWC/HWIO memory and on the layouts
//   they prefer (format any; the primitive alone, reorders left out).
// Every figure is GFLOP/s, the median of the rounds; the libraries alternate round by round so
// that load from other processes hits them alike. Baseline and ratio: against OpenBLAS (GEMM) or
// im2col + GEMM (convolutions) in the same run.
//   bench_cpu_gemm_libraries [rounds]
#include "bench_util.hpp"

#include "devices/cpu/blas_kernels.hpp"
#include "devices/device.hpp"
#include "devices/kernel.hpp"
#include "devices/thread_pool.hpp"
#include "graph/conv_geometry.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

/// BLIS's typed API (blis.h clashes with OpenBLAS's cblas.h, so it is declared here): dim_t and
/// inc_t are 64 bits in Debian's build, trans_t 0 is BLIS_NO_TRANSPOSE.
using bli_sgemm_fn = void (*)(int, int, std::int64_t, std::int64_t, std::int64_t, const float*,
                              const float*, std::int64_t, std::int64_t, const float*, std::int64_t,
                              std::int64_t, const float*, float*, std::int64_t, std::int64_t);
using bli_threads_fn = void (*)(std::int64_t);
using bli_arch_fn = int (*)();
using bli_arch_name_fn = const char* (*)(int);

struct blis_library {
  bli_sgemm_fn sgemm = nullptr;
  bli_threads_fn set_threads = nullptr;
  std::string arch;
};

/// BLIS loaded with its own symbols first (RTLD_DEEPBIND): it exports the same cblas_/sgemm_
/// names as OpenBLAS. Nothing when it is not installed.
std::optional<blis_library> load_blis() {
  void* handle = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (handle == nullptr) {
    std::fprintf(stderr, "warning: no BLIS (%s); install libblis-dev\n", dlerror());
    return std::nullopt;
  }
  blis_library blis;
  blis.sgemm = reinterpret_cast<bli_sgemm_fn>(dlsym(handle, "bli_sgemm"));
  blis.set_threads = reinterpret_cast<bli_threads_fn>(dlsym(handle, "bli_thread_set_num_threads"));
  auto arch = reinterpret_cast<bli_arch_fn>(dlsym(handle, "bli_arch_query_id"));
  auto arch_name = reinterpret_cast<bli_arch_name_fn>(dlsym(handle, "bli_arch_string"));
  if (blis.sgemm == nullptr || blis.set_threads == nullptr)
    return std::nullopt;
  if (arch != nullptr && arch_name != nullptr)
    blis.arch = arch_name(arch());
  return blis;
}

std::vector<float> random_values(std::int64_t count, unsigned seed) {
  std::mt19937 engine{seed};
  std::uniform_real_distribution<float> uniform{-1.0f, 1.0f};
  std::vector<float> values(static_cast<std::size_t>(count));
  for (auto& v : values)
    v = uniform(engine);
  return values;
}

/// Seconds per call of `f`: repeated until a round lasts at least 20 ms.
double seconds_per_call(const std::function<void()>& f) {
  f();
  int calls = 1;
  for (;;) {
    double s = bench::time_seconds([&] {
      for (int i = 0; i < calls; ++i)
        f();
    });
    if (s >= 0.02)
      return s / calls;
    calls *= 2;
  }
}

/// Candidates measured round by round (`one_by_one`: each candidate's rounds together); GFLOP/s
/// medians, by name.
std::map<std::string, double> measure(const std::vector<std::pair<std::string, std::function<void()>>>& candidates,
                                      double flops, int rounds, bool one_by_one = false) {
  std::map<std::string, std::vector<double>> rates;
  if (one_by_one)
    for (auto& [name, f] : candidates)
      for (int r = 0; r < rounds; ++r)
        rates[name].push_back(flops / seconds_per_call(f) * 1e-9);
  else
    for (int r = 0; r < rounds; ++r)
      for (auto& [name, f] : candidates)
        rates[name].push_back(flops / seconds_per_call(f) * 1e-9);
  std::map<std::string, double> medians;
  for (auto& [name, values] : rates)
    medians[name] = bench::median(values);
  return medians;
}

void emit_against(const std::string& name, double value, double baseline, const std::string& note) {
  bench::emit({name, value, "GFLOP/s", baseline, value / baseline, note});
}

// --- GEMM ---------------------------------------------------------------------------------

struct gemm_shape {
  std::string name;
  bool transpose_a, transpose_b;
  std::int64_t m, n, k;
};

/// oneDNN's matmul primitive for C[m,n] = op(A) op(B), row-major, transposes as strides.
dnnl::matmul::primitive_desc matmul_desc(const gemm_shape& s, const dnnl::engine& engine) {
  using dims = dnnl::memory::dims;
  auto f32 = dnnl::memory::data_type::f32;
  dnnl::memory::desc a({s.m, s.k}, f32, s.transpose_a ? dims{1, s.m} : dims{s.k, 1});
  dnnl::memory::desc b({s.k, s.n}, f32, s.transpose_b ? dims{1, s.k} : dims{s.n, 1});
  dnnl::memory::desc c({s.m, s.n}, f32, dims{s.n, 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine);
}

void bench_gemms(const std::optional<blis_library>& blis, int rounds) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const std::int64_t b = 128;
  std::vector<gemm_shape> shapes{
    {"1024", false, false, 1024, 1024, 1024},
    {"mlp_fwd1_128x256x784", false, false, b, 256, 784},
    {"mlp_fwd2_128x128x256", false, false, b, 128, 256},
    {"mlp_fwd3_128x10x128", false, false, b, 10, 128},
    {"mlp_dw1_tn_784x256x128", true, false, 784, 256, b},
    {"mlp_dh1_nt_128x256x128", false, true, b, 256, 128},
    {"mlp_dw2_tn_256x128x128", true, false, 256, 128, b},
    {"mlp_dh2_nt_128x128x10", false, true, b, 128, 10},
    {"mlp_dw3_tn_128x10x128", true, false, 128, 10, b}};
  for (int threads : {1, 2}) {
    openblas_set_num_threads(threads);
    if (blis)
      blis->set_threads(threads);
    omp_set_num_threads(threads); // oneDNN's OpenMP runtime: this thread's team size
    std::map<std::string, double> step_seconds;
    for (auto& s : shapes) {
      auto a = random_values(s.m * s.k, 1), bm = random_values(s.k * s.n, 2);
      std::vector<float> c(static_cast<std::size_t>(s.m * s.n));
      auto lda = s.transpose_a ? s.m : s.k, ldb = s.transpose_b ? s.k : s.n;
      std::vector<std::pair<std::string, std::function<void()>>> candidates;
      candidates.emplace_back("openblas", [&] {
        cblas_sgemm(CblasRowMajor, s.transpose_a ? CblasTrans : CblasNoTrans,
                    s.transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(s.m),
                    static_cast<blasint>(s.n), static_cast<blasint>(s.k), 1.f, a.data(),
                    static_cast<blasint>(lda), bm.data(), static_cast<blasint>(ldb), 0.f, c.data(),
                    static_cast<blasint>(s.n));
      });
      if (blis)
        candidates.emplace_back("blis", [&] {
          float one = 1.f, zero = 0.f;
          // op(A)[i][p] as strides of the stored row-major matrix; no transpose flags needed.
          blis->sgemm(0, 0, s.m, s.n, s.k, &one, a.data(), s.transpose_a ? 1 : lda,
                      s.transpose_a ? lda : 1, bm.data(), s.transpose_b ? 1 : ldb,
                      s.transpose_b ? ldb : 1, &zero, c.data(), s.n, 1);
        });
      candidates.emplace_back("onednn_sgemm", [&] {
        dnnl_sgemm(s.transpose_a ? 'T' : 'N', s.transpose_b ? 'T' : 'N', s.m, s.n, s.k, 1.f,
                   a.data(), lda, bm.data(), ldb, 0.f, c.data(), s.n);
      });
      auto pd = matmul_desc(s, engine);
      dnnl::matmul matmul(pd);
      dnnl::memory ma(pd.src_desc(), engine, a.data()), mb(pd.weights_desc(), engine, bm.data()),
        mc(pd.dst_desc(), engine, c.data());
      candidates.emplace_back("onednn_matmul", [&] {
        matmul.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
        stream.wait();
      });
      double flops = 2.0 * s.m * s.n * s.k;
      // At 2 threads each library's idle workers spin for a while after its last call (OpenBLAS's
      // threads, OpenMP's teams) and would take a core from the next one: there they take turns
      // shape by shape instead of round by round.
      auto rates = measure(candidates, flops, rounds, threads > 1);
      auto suffix = "_t" + std::to_string(threads);
      for (auto& [name, rate] : rates) {
        if (name != "openblas")
          emit_against("sgemm_" + s.name + suffix + "_" + name, rate, rates["openblas"],
                       "baseline: OpenBLAS " + blas_kernels().running + " in the same run");
        if (s.name != "1024")
          step_seconds[name] += flops / (rate * 1e9);
      }
      bench::emit({"sgemm_" + s.name + suffix + "_openblas", rates["openblas"], "GFLOP/s",
                   std::nullopt, std::nullopt, "OpenBLAS " + blas_kernels().running});
    }
    // The MLP step's eight products together, as examples/s (bench_mlp_training's GEMM bound).
    for (auto& [name, seconds] : step_seconds)
      bench::emit({"mlp_step_gemms_examples_per_s_t" + std::to_string(threads) + "_" + name,
                   b / seconds, "examples/s", b / step_seconds["openblas"],
                   step_seconds["openblas"] / seconds, "sum of the medians; baseline OpenBLAS"});
  }
}

// --- convolutions --------------------------------------------------------------------------

struct conv_shape {
  std::string name;
  std::int64_t batch, h, w, c, k, filters;
};

tensor random_tensor(const tensor_shape& shape, unsigned seed) {
  tensor t(dtype::float32, shape);
  auto values = random_values(shape.num_elements(), seed);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

/// actorflow's registered CPU kernel for `op`, run directly on a CPU device (1 thread).
struct actorflow_conv {
  node n;
  std::unique_ptr<op_kernel> kernel;
  std::vector<tensor> inputs;
};

actorflow_conv make_actorflow_conv(const std::string& op, std::vector<tensor> inputs) {
  actorflow_conv c;
  c.n.name = "conv";
  c.n.op = op;
  c.n.kernel_type = dtype::float32;
  c.n.output_types = {dtype::float32};
  c.n.attrs = {{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string{"VALID"}}};
  auto k = kernel_registry::global().create(c.n, "CPU");
  if (!k.ok()) {
    std::fprintf(stderr, "cpu_gemm_libraries: %s\n", k.error().to_string().c_str());
    std::exit(1);
  }
  c.kernel = std::move(*k);
  c.inputs = std::move(inputs);
  return c;
}

void run_actorflow_conv(actorflow_conv& c, device& dev) {
  kernel_context ctx{c.n, dev, 1, c.inputs};
  c.kernel->compute(ctx);
  if (!ctx.status().ok()) {
    std::fprintf(stderr, "cpu_gemm_libraries: %s\n", ctx.status().to_string().c_str());
    std::exit(1);
  }
}

/// The three oneDNN convolution primitives of one shape, on plain NHWC/HWIO memory or on the
/// layouts each prefers (format any), with memory of each pass's own layouts.
struct onednn_conv {
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data input;
  dnnl::convolution_backward_weights filter;
  dnnl::memory fwd_x, fwd_w, fwd_y, data_w, data_dy, data_dx, weights_x, weights_dy, weights_dw;
};

dnnl::memory random_memory(const dnnl::memory::desc& d, const dnnl::engine& engine) {
  dnnl::memory m(d, engine);
  auto values = random_values(static_cast<std::int64_t>(d.get_size() / sizeof(float)), 3);
  std::copy(values.begin(), values.end(), static_cast<float*>(m.get_data_handle()));
  return m;
}

onednn_conv make_onednn_conv(const conv_shape& s, const dnnl::engine& engine, bool plain) {
  using tag = dnnl::memory::format_tag;
  auto f32 = dnnl::memory::data_type::f32;
  auto oh = s.h - s.k + 1, ow = s.w - s.k + 1;
  dnnl::memory::dims x_dims{s.batch, s.c, s.h, s.w}, w_dims{s.filters, s.c, s.k, s.k},
    y_dims{s.batch, s.filters, oh, ow}, strides{1, 1}, pad{0, 0};
  dnnl::memory::desc x(x_dims, f32, plain ? tag::nhwc : tag::any),
    w(w_dims, f32, plain ? tag::hwio : tag::any), y(y_dims, f32, plain ? tag::nhwc : tag::any);
  auto algo = dnnl::algorithm::convolution_direct;
  dnnl::convolution_forward::primitive_desc fwd(
    {dnnl::prop_kind::forward_training, algo, x, w, y, strides, pad, pad}, engine);
  dnnl::convolution_backward_data::primitive_desc bwd_data({algo, x, w, y, strides, pad, pad},
                                                           engine, fwd);
  dnnl::convolution_backward_weights::primitive_desc bwd_weights({algo, x, w, y, strides, pad, pad},
                                                                 engine, fwd);
  std::fprintf(stderr, "onednn %s %s: forward %s, input %s, filter %s\n", s.name.c_str(),
               plain ? "nhwc" : "any", fwd.impl_info_str(), bwd_data.impl_info_str(),
               bwd_weights.impl_info_str());
  return {dnnl::convolution_forward(fwd),
          dnnl::convolution_backward_data(bwd_data),
          dnnl::convolution_backward_weights(bwd_weights),
          random_memory(fwd.src_desc(), engine),
          random_memory(fwd.weights_desc(), engine),
          dnnl::memory(fwd.dst_desc(), engine),
          random_memory(bwd_data.weights_desc(), engine),
          random_memory(bwd_data.diff_dst_desc(), engine),
          dnnl::memory(bwd_data.diff_src_desc(), engine),
          random_memory(bwd_weights.src_desc(), engine),
          random_memory(bwd_weights.diff_dst_desc(), engine),
          dnnl::memory(bwd_weights.diff_weights_desc(), engine)};
}

void bench_convolutions(int rounds) {
  openblas_set_num_threads(1);
  omp_set_num_threads(1);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  auto dev = make_cpu_device(device_name{"localhost", 0, 0, "CPU", 0},
                             std::make_shared<thread_pool>("bench_intra_op", 0));
  std::vector<conv_shape> shapes{{"cnn_conv1_32x28x28x1_5x5x16", 32, 28, 28, 1, 5, 16},
                                 {"cnn_conv2_32x12x12x16_5x5x32", 32, 12, 12, 16, 5, 32}};
  for (auto& s : shapes) {
    auto oh = s.h - s.k + 1, ow = s.w - s.k + 1;
    auto x = random_tensor({s.batch, s.h, s.w, s.c}, 4);
    auto filter = random_tensor({s.k, s.k, s.c, s.filters}, 5);
    auto dy = random_tensor({s.batch, oh, ow, s.filters}, 6);
    double flops = 2.0 * s.batch * oh * ow * s.filters * s.k * s.k * s.c;
    auto plain = make_onednn_conv(s, engine, true);
    auto blocked = make_onednn_conv(s, engine, false);
    struct pass {
      std::string name, op;
      std::vector<tensor> inputs;
      std::function<void(onednn_conv&)> onednn;
    };
    std::vector<pass> passes{
      {"forward", "Conv2D", {x, filter},
       [&](onednn_conv& c) {
         c.forward.execute(stream, {{DNNL_ARG_SRC, c.fwd_x}, {DNNL_ARG_WEIGHTS, c.fwd_w},
                                    {DNNL_ARG_DST, c.fwd_y}});
       }},
      {"input", "Conv2DBackpropInput", {x, filter, dy},
       [&](onednn_conv& c) {
         c.input.execute(stream, {{DNNL_ARG_DIFF_SRC, c.data_dx}, {DNNL_ARG_WEIGHTS, c.data_w},
                                  {DNNL_ARG_DIFF_DST, c.data_dy}});
       }},
      {"filter", "Conv2DBackpropFilter", {x, filter, dy}, [&](onednn_conv& c) {
         c.filter.execute(stream, {{DNNL_ARG_SRC, c.weights_x}, {DNNL_ARG_DIFF_WEIGHTS, c.weights_dw},
                                   {DNNL_ARG_DIFF_DST, c.weights_dy}});
       }}};
    for (auto& p : passes) {
      // Kernels made under each setting: the choice is read when a kernel is made.
      setenv("ACTORFLOW_CPU_CONV", "gemm", 1);
      auto im2col = make_actorflow_conv(p.op, p.inputs);
      unsetenv("ACTORFLOW_CPU_CONV");
      auto by_default = make_actorflow_conv(p.op, p.inputs);
      std::vector<std::pair<std::string, std::function<void()>>> candidates{
        {"im2col_gemm", [&] { run_actorflow_conv(im2col, *dev); }},
        {"actorflow_default", [&] { run_actorflow_conv(by_default, *dev); }},
        {"onednn_nhwc", [&] { p.onednn(plain); stream.wait(); }},
        {"onednn_any", [&] { p.onednn(blocked); stream.wait(); }}};
      auto rates = measure(candidates, flops, rounds);
      auto base = rates["im2col_gemm"];
      auto prefix = "conv_" + s.name + "_" + p.name + "_t1_";
      bench::emit({prefix + "im2col_gemm", base, "GFLOP/s", std::nullopt, std::nullopt,
                   "actorflow's kernel with ACTORFLOW_CPU_CONV=gemm (OpenBLAS " +
                     blas_kernels().running + ")"});
      emit_against(prefix + "actorflow_default", rates["actorflow_default"], base,
                   "actorflow's kernel as chosen by default; baseline im2col+GEMM, same run");
      emit_against(prefix + "onednn_nhwc", rates["onednn_nhwc"], base,
                   "oneDNN primitive on NHWC/HWIO memory; baseline im2col+GEMM, same run");
      emit_against(prefix + "onednn_any", rates["onednn_any"], base,
                   "oneDNN primitive on its preferred layouts, reorders left out; baseline im2col+GEMM");
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  int rounds = bench::positive_arg(argc, argv, 1, 7);
  std::fprintf(stderr, "%s\n", blas_kernels().summary.c_str());
  auto blis = load_blis();
  if (blis)
    std::fprintf(stderr, "BLIS arch: %s\n", blis->arch.c_str());
  auto v = dnnl::version();
  std::fprintf(stderr, "oneDNN %d.%d.%d, cpu runtime %s\n", v->major, v->minor, v->patch,
               v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
  bench_gemms(blis, rounds);
  bench_convolutions(rounds);
  return 0;
}
