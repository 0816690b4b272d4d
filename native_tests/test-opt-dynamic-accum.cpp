// Gate test for ggml-opt's per-step mode, the mode llama.cpp trains in: the caller builds a new
// graph every micro-step (ggml_opt_prepare_alloc, ggml_opt_alloc, ggml_opt_eval). The gradient
// accumulators live in the optimizer's static context and outlive those graphs, so they must be
// zeroed at the start of every optimizer period; otherwise step k applies the sum of all
// gradients seen since the start.
//
// Model: w (4 x F32, starts at 1.0), input x = 0.5, output = w*x, loss = SUM(output), so
// dloss/dw = x on every micro-step. SGD with a constant lr = 0.5 and no weight decay moves w by
// lr * x * opt_period = 0.25 * opt_period per optimizer step. Every micro-step therefore has one
// exact expected value of w, checked for opt_period 1, 2 and 3 over 3 optimizer steps each.
//
// Usage: test-opt-dynamic-accum [DEVICE]   (default: every device ggml reports)
// Output: one line per device and opt_period; exit 0 when all pass, 1 when any fails.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-opt.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static constexpr int64_t n_elements  = 4;
static constexpr float   w_start     = 1.0f;
static constexpr float   x_value     = 0.5f;
static constexpr float   lr          = 0.5f;
static constexpr int     n_opt_steps = 3;
static constexpr int     graph_size  = 64;

struct period_outcome {
    bool        ok       = true;
    int         step     = 0;   // first micro-step (1-based) whose w is wrong
    float       actual   = 0.0f;
    float       expected = 0.0f;
};

// w after micro_step micro-steps: one update of lr*x*opt_period per completed period
static float expected_w(int micro_step, int opt_period) {
    const int n_updates = micro_step / opt_period;
    return w_start - n_updates * lr * x_value * opt_period;
}

static period_outcome run_period(ggml_backend_t backend, ggml_backend_t backend_cpu, int opt_period) {
    period_outcome outcome;

    // the parameter lives in its own context on the device under test, like model weights do
    ggml_init_params params_static = { ggml_tensor_overhead(), nullptr, /*no_alloc =*/ true };
    ggml_context * ctx_static = ggml_init(params_static);
    ggml_tensor * w = ggml_new_tensor_1d(ctx_static, GGML_TYPE_F32, n_elements);
    ggml_set_name(w, "w");
    ggml_set_param(w);
    ggml_backend_buffer_t buf_static = ggml_backend_alloc_ctx_tensors(ctx_static, backend);
    const std::vector<float> w_init(n_elements, w_start);
    ggml_backend_tensor_set(w, w_init.data(), 0, ggml_nbytes(w));

    std::vector<ggml_backend_t> backends = { backend };
    if (backend != backend_cpu) {
        backends.push_back(backend_cpu); // the scheduler wants the CPU backend last
    }
    ggml_backend_sched_t sched = ggml_backend_sched_new(
        backends.data(), nullptr, (int) backends.size(), graph_size, false, true);

    // constant SGD parameters; they must outlive the optimizer context
    static ggml_opt_optimizer_params opt_pars;
    opt_pars = ggml_opt_get_default_optimizer_params(nullptr);
    opt_pars.sgd.alpha = lr;
    opt_pars.sgd.wd    = 0.0f;

    ggml_opt_params params = ggml_opt_default_params(sched, GGML_OPT_LOSS_TYPE_SUM);
    params.ctx_compute     = nullptr; // per-step mode: a new graph every micro-step
    params.opt_period      = opt_period;
    params.optimizer       = GGML_OPT_OPTIMIZER_TYPE_SGD;
    params.get_opt_pars    = ggml_opt_get_constant_optimizer_params;
    params.get_opt_pars_ud = &opt_pars;
    ggml_opt_context_t opt_ctx = ggml_opt_init(params);

    // compute contexts are kept until the end: the scheduler may still point into the last one
    std::vector<ggml_context *> ctxs_compute;
    const std::vector<float> x_data(n_elements, x_value);
    std::vector<float> w_data(n_elements);

    const int n_micro_steps = n_opt_steps * opt_period;
    for (int step = 1; step <= n_micro_steps && outcome.ok; ++step) {
        ggml_init_params params_compute = {
            4*ggml_graph_overhead_custom(graph_size, /*grads =*/ true) + graph_size*ggml_tensor_overhead(),
            nullptr, /*no_alloc =*/ true,
        };
        ggml_context * ctx_compute = ggml_init(params_compute);
        ctxs_compute.push_back(ctx_compute);

        ggml_tensor * x = ggml_new_tensor_1d(ctx_compute, GGML_TYPE_F32, n_elements);
        ggml_set_name(x, "x");
        ggml_tensor * out = ggml_mul(ctx_compute, w, x);
        ggml_set_name(out, "out");
        ggml_cgraph * gf = ggml_new_graph_custom(ctx_compute, graph_size, /*grads =*/ true);
        ggml_build_forward_expand(gf, out);

        ggml_opt_prepare_alloc(opt_ctx, ctx_compute, gf, x, out);
        ggml_opt_alloc(opt_ctx, /*backward =*/ true);
        ggml_backend_tensor_set(x, x_data.data(), 0, ggml_nbytes(x));
        ggml_opt_eval(opt_ctx, nullptr);

        ggml_backend_tensor_get(w, w_data.data(), 0, ggml_nbytes(w));
        const float expected = expected_w(step, opt_period);
        for (int64_t i = 0; i < n_elements; ++i) {
            if (!(std::fabs(w_data[i] - expected) <= 1e-5f)) {
                outcome = { false, step, w_data[i], expected };
                break;
            }
        }
    }

    ggml_opt_free(opt_ctx);
    for (ggml_context * ctx : ctxs_compute) {
        ggml_free(ctx);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(buf_static);
    ggml_free(ctx_static);
    return outcome;
}

// whether the device can run the SGD step at all (as test-opt decides its skips)
static bool supports_sgd(ggml_backend_t backend) {
    ggml_init_params params = { 4*ggml_tensor_overhead(), nullptr, /*no_alloc =*/ true };
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_elements);
    ggml_set_param(a);
    ggml_tensor * g = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_elements);
    ggml_tensor * p = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2);
    const bool ok = ggml_backend_supports_op(backend, ggml_opt_step_sgd(ctx, a, g, p));
    ggml_free(ctx);
    return ok;
}

int main(int argc, char ** argv) {
    ggml_log_set(nullptr, nullptr);
    ggml_backend_load_all();

    const char * only_device = argc > 1 ? argv[1] : nullptr;
    std::vector<ggml_backend_dev_t> devs;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (!only_device || strcmp(ggml_backend_dev_name(dev), only_device) == 0) {
            devs.push_back(dev);
        }
    }
    if (devs.empty()) {
        fprintf(stderr, "test-opt-dynamic-accum: no device named '%s'; devices:", only_device ? only_device : "");
        for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
            fprintf(stderr, " %s", ggml_backend_dev_name(ggml_backend_dev_get(i)));
        }
        fprintf(stderr, "\n");
        return 2;
    }

    ggml_backend_t backend_cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    if (!backend_cpu) {
        fprintf(stderr, "test-opt-dynamic-accum: no CPU backend\n");
        return 2;
    }

    printf("test-opt-dynamic-accum: per-step graphs, SGD lr=%g, x=%g, loss SUM, %d optimizer steps per opt_period\n",
        lr, x_value, n_opt_steps);
    int n_pass = 0, n_fail = 0, n_skip = 0;
    for (ggml_backend_dev_t dev : devs) {
        const char * name = ggml_backend_dev_name(dev);
        const bool is_cpu = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
        ggml_backend_t backend = is_cpu ? backend_cpu : ggml_backend_dev_init(dev, nullptr);
        if (!backend) {
            printf("device=%s: FAIL could not initialise the device\n", name);
            n_fail++;
            continue;
        }
        const bool skip = !supports_sgd(backend);
        for (int opt_period = 1; opt_period <= 3; ++opt_period) {
            if (skip) {
                printf("device=%s opt_period=%d: SKIPPED (OPT_STEP_SGD not supported)\n", name, opt_period);
                n_skip++;
                continue;
            }
            const period_outcome r = run_period(backend, backend_cpu, opt_period);
            if (r.ok) {
                printf("device=%s opt_period=%d: OK (%d micro-steps)\n", name, opt_period, n_opt_steps*opt_period);
                n_pass++;
            } else {
                printf("device=%s opt_period=%d: FAIL at step %d: w=%g expected %g\n",
                    name, opt_period, r.step, r.actual, r.expected);
                n_fail++;
            }
            fflush(stdout);
        }
        if (!is_cpu) {
            ggml_backend_free(backend);
        }
    }
    ggml_backend_free(backend_cpu);

    printf("%d/%d device*opt_period passed, %d skipped\n", n_pass, n_pass + n_fail + n_skip, n_skip);
    return n_fail == 0 ? 0 : 1;
}
