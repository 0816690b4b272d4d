// Gate test for per-step graphs in ggml-opt (a new graph every micro-step, as llama.cpp trains).
// The gradient accumulators outlive those graphs, so they must be zeroed after every optimizer step.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-opt.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// model: w (4 x F32, starts at 1.0) and output w*x, so the gradient of w is x (loss SUM) or x/(opt_period*4) (loss MEAN)
static constexpr int64_t n_elements  = 4;
static constexpr float   w_start     = 1.0f;
static constexpr float   x_value     = 0.5f;
static constexpr float   lr          = 0.5f;
static constexpr int     n_opt_steps = 3;
static constexpr int     graph_size  = 64;

// ---- case opt_period=N: SGD with lr 0.5, constant x, loss SUM, 3 optimizer steps; w after each micro-step is exact ----

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

// ---- case=schedule-S: S lists the micro-steps (T = train, E = forward-only eval), x changes every micro-step ----

struct schedule_case {
    const char *            schedule;   // T = train micro-step, E = forward-only eval
    int                     opt_period;
    ggml_opt_optimizer_type optimizer;
    ggml_opt_loss_type      loss_type;
};

static constexpr float  sched_sgd_lr   = 1.0f/16;  // a power of 2: SGD values stay exact in F32
static constexpr float  sched_adamw_lr = 0.1f;
static constexpr float  x_scale[n_elements] = { 1.0f, -0.5f, 0.75f, -1.5f };

// x_i = c_i * (-2)^(step-1): no two sets of gradients have the same sum
static std::vector<float> x_at(int step) {
    std::vector<float> x(n_elements);
    const float p = std::ldexp(step % 2 == 1 ? 1.0f : -1.0f, step - 1);
    for (int64_t i = 0; i < n_elements; ++i) {
        x[i] = x_scale[i] * p;
    }
    return x;
}

static ggml_opt_optimizer_params optimizer_params() {
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.sgd.alpha   = sched_sgd_lr;
    p.sgd.wd      = 0.0f;
    p.adamw.alpha = sched_adamw_lr;
    p.adamw.wd    = 0.0f;
    return p;
}

using trajectory = std::vector<std::vector<float>>; // w after each micro-step

// static graphs on the host: an optimizer step applies the sum of the gradients since the last step, every eval advances opt_i
static trajectory host_model(const schedule_case & c) {
    const ggml_opt_optimizer_params p = optimizer_params();
    std::vector<double> w(n_elements, w_start), acc(n_elements, 0.0), m(n_elements, 0.0), v(n_elements, 0.0);
    int     opt_i = 0;
    int64_t iter  = 1;
    trajectory out;
    const int n_steps = (int) strlen(c.schedule);
    for (int step = 1; step <= n_steps; ++step) {
        if (c.schedule[step - 1] == 'T') {
            const std::vector<float> x = x_at(step);
            const double scale = c.loss_type == GGML_OPT_LOSS_TYPE_MEAN ? 1.0 / (c.opt_period * n_elements) : 1.0;
            for (int64_t i = 0; i < n_elements; ++i) {
                acc[i] += x[i] * scale;
            }
            if ((opt_i + 1) % c.opt_period == 0) {
                const double b1h = 1.0 / (1.0 - std::pow((double) p.adamw.beta1, (double) iter));
                const double b2h = 1.0 / (1.0 - std::pow((double) p.adamw.beta2, (double) iter));
                for (int64_t i = 0; i < n_elements; ++i) {
                    if (c.optimizer == GGML_OPT_OPTIMIZER_TYPE_SGD) {
                        w[i] -= p.sgd.alpha * acc[i];
                    } else {
                        m[i] = m[i] * p.adamw.beta1 + acc[i] * (1.0 - p.adamw.beta1);
                        v[i] = v[i] * p.adamw.beta2 + acc[i] * acc[i] * (1.0 - p.adamw.beta2);
                        w[i] -= p.adamw.alpha * (m[i] * b1h) / (std::sqrt(v[i] * b2h) + p.adamw.eps);
                    }
                    acc[i] = 0.0;
                }
                iter++;
            }
        }
        opt_i = (opt_i + 1) % c.opt_period;
        out.emplace_back(w.begin(), w.end());
    }
    return out;
}

// the schedule run by ggml-opt, with per-step graphs (static_graphs false) or static graphs
static trajectory run_schedule(ggml_backend_t backend, ggml_backend_t backend_cpu, const schedule_case & c, bool static_graphs) {
    ggml_init_params params_static = { 2*ggml_tensor_overhead(), nullptr, /*no_alloc =*/ true };
    ggml_context * ctx_static = ggml_init(params_static);
    ggml_tensor * w = ggml_new_tensor_1d(ctx_static, GGML_TYPE_F32, n_elements);
    ggml_set_name(w, "w");
    ggml_set_param(w);
    // static graphs need their input allocated with the parameters
    ggml_tensor * x_static = static_graphs ? ggml_new_tensor_1d(ctx_static, GGML_TYPE_F32, n_elements) : nullptr;
    ggml_backend_buffer_t buf_static = ggml_backend_alloc_ctx_tensors(ctx_static, backend);
    const std::vector<float> w_init(n_elements, w_start);
    ggml_backend_tensor_set(w, w_init.data(), 0, ggml_nbytes(w));

    std::vector<ggml_backend_t> backends = { backend };
    if (backend != backend_cpu) {
        backends.push_back(backend_cpu);
    }
    ggml_backend_sched_t sched = ggml_backend_sched_new(
        backends.data(), nullptr, (int) backends.size(), GGML_DEFAULT_GRAPH_SIZE, false, true);

    ggml_opt_optimizer_params opt_pars = optimizer_params(); // outlives opt_ctx
    ggml_opt_params params = ggml_opt_default_params(sched, c.loss_type);
    params.opt_period      = c.opt_period;
    params.optimizer       = c.optimizer;
    params.get_opt_pars    = ggml_opt_get_constant_optimizer_params;
    params.get_opt_pars_ud = &opt_pars;

    std::vector<ggml_context *> ctxs_compute;
    if (static_graphs) {
        ggml_init_params params_compute = {
            GGML_DEFAULT_GRAPH_SIZE*ggml_tensor_overhead() + 3*ggml_graph_overhead(), nullptr, /*no_alloc =*/ true,
        };
        ggml_context * ctx_compute = ggml_init(params_compute);
        ctxs_compute.push_back(ctx_compute);
        params.ctx_compute = ctx_compute;
        params.inputs      = x_static;
        params.outputs     = ggml_mul(ctx_compute, w, x_static);
    } else {
        params.ctx_compute = nullptr;
    }
    ggml_opt_context_t opt_ctx = ggml_opt_init(params);

    trajectory out;
    std::vector<float> w_data(n_elements);
    const int n_steps = (int) strlen(c.schedule);
    for (int step = 1; step <= n_steps; ++step) {
        const bool backward = c.schedule[step - 1] == 'T';
        ggml_tensor * x = x_static;
        if (!static_graphs) {
            ggml_init_params params_compute = {
                4*ggml_graph_overhead_custom(graph_size, /*grads =*/ true) + graph_size*ggml_tensor_overhead(),
                nullptr, /*no_alloc =*/ true,
            };
            ggml_context * ctx_compute = ggml_init(params_compute);
            ctxs_compute.push_back(ctx_compute);
            x = ggml_new_tensor_1d(ctx_compute, GGML_TYPE_F32, n_elements);
            ggml_tensor * o = ggml_mul(ctx_compute, w, x);
            ggml_cgraph * gf = ggml_new_graph_custom(ctx_compute, graph_size, /*grads =*/ true);
            ggml_build_forward_expand(gf, o);
            ggml_opt_prepare_alloc(opt_ctx, ctx_compute, gf, x, o);
        }
        ggml_opt_alloc(opt_ctx, backward);
        const std::vector<float> x_data = x_at(step);
        ggml_backend_tensor_set(x, x_data.data(), 0, ggml_nbytes(x));
        ggml_opt_eval(opt_ctx, nullptr);
        ggml_backend_tensor_get(w, w_data.data(), 0, ggml_nbytes(w));
        out.push_back(w_data);
    }

    ggml_opt_free(opt_ctx);
    for (ggml_context * ctx : ctxs_compute) {
        ggml_free(ctx);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(buf_static);
    ggml_free(ctx_static);
    return out;
}

static bool close_to(double actual, double expected, double rtol) {
    return std::fabs(actual - expected) <= rtol * std::fmax(1.0, std::fabs(expected));
}

// empty when per-step graphs match static graphs and static graphs match the host model, else the first mismatch (micro-steps counted from 1, E steps included)
static std::string check_schedule(ggml_backend_t backend, ggml_backend_t backend_cpu, const schedule_case & c) {
    const trajectory per_step = run_schedule(backend, backend_cpu, c, /*static_graphs =*/ false);
    const trajectory stat     = run_schedule(backend, backend_cpu, c, /*static_graphs =*/ true);
    const trajectory host     = host_model(c);
    // SGD values are exact; AdamW's sqrt and division differ by a few ulp between devices
    const double rtol_host = c.optimizer == GGML_OPT_OPTIMIZER_TYPE_SGD ? 1e-6 : 1e-4;
    char buf[256];
    for (size_t s = 0; s < host.size(); ++s) {
        for (int64_t i = 0; i < n_elements; ++i) {
            if (!close_to(per_step[s][i], stat[s][i], 1e-5)) {
                snprintf(buf, sizeof(buf), "FAIL at step %d: w=%.9g expected %.9g (per-step graphs vs static graphs, w[%d])",
                    (int) s + 1, per_step[s][i], stat[s][i], (int) i);
                return buf;
            }
        }
        for (int64_t i = 0; i < n_elements; ++i) {
            if (!close_to(stat[s][i], host[s][i], rtol_host)) {
                snprintf(buf, sizeof(buf), "FAIL at step %d: w=%.9g expected %.9g (static graphs vs host model, w[%d])",
                    (int) s + 1, stat[s][i], host[s][i], (int) i);
                return buf;
            }
        }
    }
    return "";
}

// loss MEAN uses opt_period 2 and 4 so that 1/(opt_period*4) is exact
static std::vector<schedule_case> schedule_cases() {
    static const char * schedules[] = { "TTTTTT", "TTETTTETTT", "TETTTTETTT", "ETTEETTTTT" };
    std::vector<schedule_case> cases;
    for (const char * s : schedules) {
        for (ggml_opt_optimizer_type o : { GGML_OPT_OPTIMIZER_TYPE_SGD, GGML_OPT_OPTIMIZER_TYPE_ADAMW }) {
            for (int p = 1; p <= 3; ++p) {
                cases.push_back({ s, p, o, GGML_OPT_LOSS_TYPE_SUM });
            }
        }
    }
    cases.push_back({ "TTTETTTTETTT", 2, GGML_OPT_OPTIMIZER_TYPE_SGD, GGML_OPT_LOSS_TYPE_MEAN });
    cases.push_back({ "TTTETTTTETTT", 4, GGML_OPT_OPTIMIZER_TYPE_SGD, GGML_OPT_LOSS_TYPE_MEAN });
    return cases;
}

static std::string case_name(const schedule_case & c) {
    return std::string("case=schedule-") + c.schedule + " opt_period=" + std::to_string(c.opt_period) +
        " optimizer=" + (c.optimizer == GGML_OPT_OPTIMIZER_TYPE_SGD ? "sgd" : "adamw") +
        " loss=" + (c.loss_type == GGML_OPT_LOSS_TYPE_MEAN ? "mean" : "sum");
}

// whether the device can run the optimizer step at all (as test-opt decides its skips)
static bool supports_optimizer(ggml_backend_t backend, ggml_opt_optimizer_type optimizer) {
    ggml_init_params params = { 8*ggml_tensor_overhead(), nullptr, /*no_alloc =*/ true };
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_elements);
    ggml_set_param(a);
    ggml_tensor * g = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_elements);
    ggml_tensor * op = nullptr;
    if (optimizer == GGML_OPT_OPTIMIZER_TYPE_SGD) {
        op = ggml_opt_step_sgd(ctx, a, g, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2));
    } else {
        ggml_tensor * m = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_elements);
        ggml_tensor * v = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_elements);
        op = ggml_opt_step_adamw(ctx, a, g, m, v, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 7));
    }
    const bool ok = ggml_backend_supports_op(backend, op);
    ggml_free(ctx);
    return ok;
}

// Usage: test-opt-dynamic-accum [DEVICE] (default: every device). Output: one line per device and case, then a summary line.
// Exit code: 0 = all pass, 1 = a case fails, 2 = usage or setup error.
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

    printf("test-opt-dynamic-accum: per-step graphs; opt_period=N: SGD lr=%g, x=%g, loss SUM, %d optimizer steps; "
        "case=schedule-*: per-step vs static graphs vs host model\n", lr, x_value, n_opt_steps);
    const std::vector<schedule_case> cases = schedule_cases();
    int n_pass = 0, n_fail = 0, n_skip = 0;
    for (ggml_backend_dev_t dev : devs) {
        const char * name = ggml_backend_dev_name(dev);
        const bool is_cpu = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
        ggml_backend_t backend = is_cpu ? backend_cpu : ggml_backend_dev_init(dev, nullptr);

        std::vector<std::string> names;
        for (int opt_period = 1; opt_period <= 3; ++opt_period) {
            names.push_back("opt_period=" + std::to_string(opt_period));
        }
        for (const schedule_case & c : cases) {
            names.push_back(case_name(c));
        }
        if (!backend) {
            for (const std::string & n : names) {
                printf("device=%s %s: FAIL could not initialise the device\n", name, n.c_str());
                n_fail++;
            }
            continue;
        }
        const bool has_sgd   = supports_optimizer(backend, GGML_OPT_OPTIMIZER_TYPE_SGD);
        const bool has_adamw = supports_optimizer(backend, GGML_OPT_OPTIMIZER_TYPE_ADAMW);

        for (int opt_period = 1; opt_period <= 3; ++opt_period) {
            const char * n = names[opt_period - 1].c_str();
            if (!has_sgd) {
                printf("device=%s %s: SKIPPED (OPT_STEP_SGD not supported)\n", name, n);
                n_skip++;
                continue;
            }
            const period_outcome r = run_period(backend, backend_cpu, opt_period);
            if (r.ok) {
                printf("device=%s %s: OK (%d micro-steps)\n", name, n, n_opt_steps*opt_period);
                n_pass++;
            } else {
                printf("device=%s %s: FAIL at step %d: w=%g expected %g\n", name, n, r.step, r.actual, r.expected);
                n_fail++;
            }
            fflush(stdout);
        }
        for (size_t k = 0; k < cases.size(); ++k) {
            const schedule_case & c = cases[k];
            const char * n = names[3 + k].c_str();
            const bool sgd = c.optimizer == GGML_OPT_OPTIMIZER_TYPE_SGD;
            if (!(sgd ? has_sgd : has_adamw)) {
                printf("device=%s %s: SKIPPED (%s not supported)\n", name, n, sgd ? "OPT_STEP_SGD" : "OPT_STEP_ADAMW");
                n_skip++;
                continue;
            }
            const std::string failure = check_schedule(backend, backend_cpu, c);
            if (failure.empty()) {
                printf("device=%s %s: OK (%d micro-steps)\n", name, n, (int) strlen(c.schedule));
                n_pass++;
            } else {
                printf("device=%s %s: %s\n", name, n, failure.c_str());
                n_fail++;
            }
            fflush(stdout);
        }
        if (!is_cpu) {
            ggml_backend_free(backend);
        }
    }
    ggml_backend_free(backend_cpu);

    printf("%d/%d device*case passed, %d skipped\n", n_pass, n_pass + n_fail + n_skip, n_skip);
    return n_fail == 0 ? 0 : 1;
}
