// Probe for patches/known-limits.yaml (not part of the gate): ggml_opt_reset and ggml_opt_grad_acc with per-step graphs.
// Model as in test-opt-dynamic-accum: w (4 x F32, 1.0), output w*x, SGD lr 1/16, loss SUM, opt_period 2, CPU.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static constexpr int64_t n = 4;
static constexpr int     graph_size = 64;

struct run {
    ggml_context * ctx_static;
    ggml_tensor * w;
    ggml_tensor * x_static;
    ggml_backend_buffer_t buf;
    ggml_backend_sched_t sched;
    ggml_opt_context_t opt;
    std::vector<ggml_context *> ctxs;
    bool static_graphs;
    ggml_opt_optimizer_params pars;
};

static void init(run & r, ggml_backend_t cpu, bool static_graphs) {
    r.static_graphs = static_graphs;
    ggml_init_params ps = { 2*ggml_tensor_overhead(), nullptr, true };
    r.ctx_static = ggml_init(ps);
    r.w = ggml_new_tensor_1d(r.ctx_static, GGML_TYPE_F32, n);
    ggml_set_param(r.w);
    r.x_static = static_graphs ? ggml_new_tensor_1d(r.ctx_static, GGML_TYPE_F32, n) : nullptr;
    r.buf = ggml_backend_alloc_ctx_tensors(r.ctx_static, cpu);
    std::vector<float> w0(n, 1.0f);
    ggml_backend_tensor_set(r.w, w0.data(), 0, ggml_nbytes(r.w));
    r.sched = ggml_backend_sched_new(&cpu, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    r.pars = ggml_opt_get_default_optimizer_params(nullptr);
    r.pars.sgd.alpha = 1.0f/16;
    r.pars.sgd.wd = 0.0f;
    ggml_opt_params p = ggml_opt_default_params(r.sched, GGML_OPT_LOSS_TYPE_SUM);
    p.opt_period = 2;
    p.optimizer = GGML_OPT_OPTIMIZER_TYPE_SGD;
    p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    p.get_opt_pars_ud = &r.pars;
    if (static_graphs) {
        ggml_init_params pc = { GGML_DEFAULT_GRAPH_SIZE*ggml_tensor_overhead() + 3*ggml_graph_overhead(), nullptr, true };
        ggml_context * c = ggml_init(pc);
        r.ctxs.push_back(c);
        p.ctx_compute = c;
        p.inputs = r.x_static;
        p.outputs = ggml_mul(c, r.w, r.x_static);
    } else {
        p.ctx_compute = nullptr;
    }
    r.opt = ggml_opt_init(p);
}

// one training micro-step with x = value everywhere; returns w[0] after it
static float train(run & r, float value) {
    ggml_tensor * x = r.x_static;
    if (!r.static_graphs) {
        ggml_init_params pc = { 4*ggml_graph_overhead_custom(graph_size, true) + graph_size*ggml_tensor_overhead(), nullptr, true };
        ggml_context * c = ggml_init(pc);
        r.ctxs.push_back(c);
        x = ggml_new_tensor_1d(c, GGML_TYPE_F32, n);
        ggml_tensor * o = ggml_mul(c, r.w, x);
        ggml_cgraph * gf = ggml_new_graph_custom(c, graph_size, true);
        ggml_build_forward_expand(gf, o);
        ggml_opt_prepare_alloc(r.opt, c, gf, x, o);
    }
    ggml_opt_alloc(r.opt, true);
    std::vector<float> xd(n, value);
    ggml_backend_tensor_set(x, xd.data(), 0, ggml_nbytes(x));
    ggml_opt_eval(r.opt, nullptr);
    float w0;
    ggml_backend_tensor_get(r.w, &w0, 0, sizeof(float));
    return w0;
}

static void done(run & r) {
    ggml_opt_free(r.opt);
    for (ggml_context * c : r.ctxs) {
        ggml_free(c);
    }
    ggml_backend_sched_free(r.sched);
    ggml_backend_buffer_free(r.buf);
    ggml_free(r.ctx_static);
}

int main(int argc, char ** argv) {
    ggml_log_set(nullptr, nullptr);
    ggml_backend_t cpu = ggml_backend_cpu_init();

    // ggml_opt_reset(false) between the two micro-steps of a period: static graphs zero the accumulators
    for (bool static_graphs : { true, false }) {
        if (argc > 1) {
            break;
        }
        run r;
        init(r, cpu, static_graphs);
        train(r, 1.0f);
        ggml_opt_reset(r.opt, /*optimizer =*/ false);
        const float w = train(r, 2.0f);
        printf("limit=opt-reset-no-op-per-step graphs=%s: w after T reset T = %g (%s)\n",
            static_graphs ? "static" : "per-step", w,
            w == 1.0f - 2.0f/16 ? "only the second gradient: reset took effect" : "both gradients: reset did nothing");
        done(r);
    }

    // ggml_opt_grad_acc after one training eval; with argument "grad-acc static|per-step" only that (it may crash)
    if (argc == 3 && strcmp(argv[1], "grad-acc") == 0) {
        const bool static_graphs = strcmp(argv[2], "static") == 0;
        run r;
        init(r, cpu, static_graphs);
        train(r, 1.0f);
        printf("limit=grad-acc-null-gb-opt graphs=%s: calling ggml_opt_grad_acc\n", argv[2]);
        fflush(stdout);
        ggml_tensor * acc = ggml_opt_grad_acc(r.opt, r.w);
        printf("limit=grad-acc-null-gb-opt graphs=%s: ggml_opt_grad_acc returned %s\n", argv[2], acc ? "the accumulator" : "NULL");
        done(r);
    }
    ggml_backend_free(cpu);
    return 0;
}
