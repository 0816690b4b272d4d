// Training evidence for the ggml-opt per-step accumulator fix: a small model trained the way
// llama.cpp trains (a new graph every step: ggml_opt_prepare_alloc, ggml_opt_alloc, ggml_opt_eval),
// on data generated from a fixed seed, with a train/eval split. Prints train and eval loss per
// epoch. Not a gate: it shows what the bug does to real training. Without the fix every step
// applies the sum of all gradients so far, so the effective step keeps growing and the loss
// overshoots or diverges.
//
// Model: linear regression y = w.x + b, 8 inputs; data y = w_true.x + b_true + noise.
// Loss: mean squared error; SGD, constant lr, opt_period 1, batch 16.
//
// Usage: train-opt-dynamic [DEVICE]   (default: the first device ggml reports)
// Output: "epoch=E train_loss=L eval_loss=L" per epoch.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-opt.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

static constexpr int64_t n_in       = 8;
static constexpr int64_t n_data     = 256;
static constexpr int64_t n_train    = 192;   // the rest is the eval split
static constexpr int64_t batch      = 16;
static constexpr int     n_epochs   = 6;
static constexpr float   lr         = 0.05f;
static constexpr int     graph_size = 128;

// a fixed-seed generator whose numbers do not depend on the C++ library (unlike <random>'s distributions)
struct lcg {
    uint64_t s;
    float uniform() {  // [-1, 1)
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return (float) ((s >> 40) & 0xFFFFFF) / (float) 0x800000 - 1.0f;
    }
};

struct dataset {
    std::vector<float> x; // n_data x n_in
    std::vector<float> y; // n_data
};

static dataset make_data() {
    lcg rng{42};
    float w_true[n_in];
    for (float & w : w_true) {
        w = 2.0f * rng.uniform();
    }
    const float b_true = 0.5f;
    dataset d;
    d.x.resize(n_data * n_in);
    d.y.resize(n_data);
    for (int64_t i = 0; i < n_data; ++i) {
        float y = b_true;
        for (int64_t j = 0; j < n_in; ++j) {
            d.x[i*n_in + j] = rng.uniform();
            y += w_true[j] * d.x[i*n_in + j];
        }
        d.y[i] = y + 0.05f * rng.uniform();
    }
    return d;
}

int main(int argc, char ** argv) {
    ggml_log_set(nullptr, nullptr);
    ggml_backend_load_all();

    ggml_backend_dev_t dev = nullptr;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        if (argc < 2 || strcmp(ggml_backend_dev_name(d), argv[1]) == 0) {
            dev = d;
            break;
        }
    }
    if (!dev) {
        fprintf(stderr, "train-opt-dynamic: no device named '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    ggml_backend_t backend_cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    const bool is_cpu = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
    ggml_backend_t backend = is_cpu ? backend_cpu : ggml_backend_dev_init(dev, nullptr);
    std::vector<ggml_backend_t> backends = { backend };
    if (!is_cpu) {
        backends.push_back(backend_cpu);
    }
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), graph_size, false, true);

    // parameters, like model weights, in their own context on the device
    ggml_init_params params_static = { 2*ggml_tensor_overhead(), nullptr, true };
    ggml_context * ctx_static = ggml_init(params_static);
    ggml_tensor * w = ggml_new_tensor_2d(ctx_static, GGML_TYPE_F32, n_in, 1);
    ggml_tensor * b = ggml_new_tensor_1d(ctx_static, GGML_TYPE_F32, 1);
    ggml_set_name(w, "w");
    ggml_set_name(b, "b");
    ggml_set_param(w);
    ggml_set_param(b);
    ggml_backend_buffer_t buf_static = ggml_backend_alloc_ctx_tensors(ctx_static, backend);
    ggml_backend_buffer_clear(buf_static, 0);

    static ggml_opt_optimizer_params opt_pars;
    opt_pars = ggml_opt_get_default_optimizer_params(nullptr);
    opt_pars.sgd.alpha = lr;
    opt_pars.sgd.wd    = 0.0f;
    ggml_opt_params params = ggml_opt_default_params(sched, GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR);
    params.ctx_compute     = nullptr; // per-step graphs
    params.opt_period      = 1;
    params.optimizer       = GGML_OPT_OPTIMIZER_TYPE_SGD;
    params.get_opt_pars    = ggml_opt_get_constant_optimizer_params;
    params.get_opt_pars_ud = &opt_pars;
    ggml_opt_context_t opt_ctx = ggml_opt_init(params);

    const dataset data = make_data();
    std::vector<ggml_context *> ctxs; // kept to the end: the scheduler may point into the last one

    // one micro-step on rows [first, first+batch): a new graph, as llama.cpp builds them
    auto step = [&](int64_t first, bool backward, ggml_opt_result_t result) {
        ggml_init_params p = { 4*ggml_graph_overhead_custom(graph_size, true) + graph_size*ggml_tensor_overhead(), nullptr, true };
        ggml_context * ctx = ggml_init(p);
        ctxs.push_back(ctx);
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_in, batch);
        ggml_tensor * pred = ggml_add(ctx, ggml_mul_mat(ctx, w, x), b); // [1, batch]
        ggml_cgraph * gf = ggml_new_graph_custom(ctx, graph_size, true);
        ggml_build_forward_expand(gf, pred);
        ggml_opt_prepare_alloc(opt_ctx, ctx, gf, x, pred);
        ggml_opt_alloc(opt_ctx, backward);
        ggml_backend_tensor_set(x, data.x.data() + first*n_in, 0, ggml_nbytes(x));
        ggml_backend_tensor_set(ggml_opt_labels(opt_ctx), data.y.data() + first, 0, batch*sizeof(float));
        ggml_opt_eval(opt_ctx, result);
    };

    printf("train-opt-dynamic: linear regression, %d inputs, %" PRId64 " train / %" PRId64 " eval rows, "
           "batch %" PRId64 ", SGD lr=%g, per-step graphs, device %s\n",
           (int) n_in, n_train, n_data - n_train, batch, lr, ggml_backend_dev_name(dev));
    for (int epoch = 1; epoch <= n_epochs; ++epoch) {
        ggml_opt_result_t train = ggml_opt_result_init();
        ggml_opt_result_t eval  = ggml_opt_result_init();
        for (int64_t first = 0; first + batch <= n_train; first += batch) {
            step(first, /*backward =*/ true, train);
        }
        for (int64_t first = n_train; first + batch <= n_data; first += batch) {
            step(first, /*backward =*/ false, eval);
        }
        double train_loss, eval_loss;
        ggml_opt_result_loss(train, &train_loss, nullptr);
        ggml_opt_result_loss(eval,  &eval_loss,  nullptr);
        printf("epoch=%d train_loss=%.6g eval_loss=%.6g\n", epoch, train_loss, eval_loss);
        fflush(stdout);
        ggml_opt_result_free(train);
        ggml_opt_result_free(eval);
    }

    ggml_opt_free(opt_ctx);
    for (ggml_context * ctx : ctxs) {
        ggml_free(ctx);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(buf_static);
    ggml_free(ctx_static);
    if (!is_cpu) {
        ggml_backend_free(backend);
    }
    ggml_backend_free(backend_cpu);
    return 0;
}
