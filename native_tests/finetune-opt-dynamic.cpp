// Training evidence on llama.cpp's own training path (not part of the patch series).
//
// Fine-tunes a model with llama_opt_init / llama_opt_epoch the way examples/training/finetune.cpp
// does (per-step graphs: llama_context builds one graph per ubatch; opt_period = n_batch / n_ubatch),
// but links only libllama (no common/), so the tokenizer, the dataset split and the constant
// learning rate are done here with the public API. CPU only; no randomness (the data is not
// shuffled, the model comes from a file), so a fixed thread count gives the same numbers.
//
// Output, one line each, key=value pairs separated by single spaces:
//   config model=<path> n_vocab=<N> n_ctx=<N> n_batch=<N> n_ubatch=<N> opt_period=<N> optimizer=<sgd|adamw> lr=<X> wd=<X> tokens=<N> ndata=<N> ndata_train=<N> ndata_eval=<N> threads=<N>
//   epoch=<N> train_loss=<X> eval_loss=<X> train_acc=<X> eval_acc=<X> optimizer=<name> opt_period=<N>
//   done epochs=<N> train_loss=<X> eval_loss=<X> seconds=<X>
// Exit 0 on success, 2 on a usage or setup error (a line starting with "error:" says which).

#include "llama.h"
#include "ggml.h"
#include "ggml-opt.h"

#include <chrono>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct options {
    std::string              model;
    std::vector<std::string> files;
    std::string              optimizer = "adamw";
    uint32_t n_ctx     = 256;  // llama_context pads n_ctx to a multiple of 256: smaller is not possible
    uint32_t n_batch   = 128;
    uint32_t n_ubatch  = 128;
    float    lr        = 1e-5f; // finetune.cpp's default (common_params.lr.lr0)
    float    wd        = 0.0f;  // finetune.cpp's default
    int      epochs    = 2;     // finetune.cpp's default
    float    val_split = 0.05f; // finetune.cpp's default
    int      threads   = 2;
    bool     verbose   = false;
};

struct lr_state {
    ggml_opt_optimizer_params params;
};

void usage(const char * argv0) {
    fprintf(stderr,
        "usage: %s -m MODEL.gguf -f TEXT [-f TEXT ...] [--optimizer sgd|adamw] [-c N_CTX] [-b N_BATCH] [-ub N_UBATCH]\n"
        "          [--lr X] [--wd X] [--epochs N] [--val-split X] [-t THREADS] [-v]\n"
        "  opt_period = n_batch / n_ubatch; the text files are concatenated, tokenized by the model's own tokenizer,\n"
        "  cut into n_ctx-token datapoints with stride n_ctx/2 (as common_opt_dataset_init does) and split train/eval.\n",
        argv0);
}

bool parse_args(int argc, char ** argv, options & o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&](const char * what) -> const char * {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s needs a value\n", what);
                return nullptr;
            }
            return argv[++i];
        };
        const char * v = nullptr;
        if (a == "-h" || a == "--help") { usage(argv[0]); exit(0); }
        else if (a == "-v")                                 { o.verbose = true; }
        else if (a == "-m" || a == "--model")               { if (!(v = next("-m")))           return false; o.model = v; }
        else if (a == "-f" || a == "--file")                { if (!(v = next("-f")))           return false; o.files.push_back(v); }
        else if (a == "--optimizer" || a == "-opt")         { if (!(v = next("--optimizer"))) return false; o.optimizer = v; }
        else if (a == "-c" || a == "--ctx-size")            { if (!(v = next("-c")))           return false; o.n_ctx = (uint32_t) atoi(v); }
        else if (a == "-b" || a == "--batch-size")          { if (!(v = next("-b")))           return false; o.n_batch = (uint32_t) atoi(v); }
        else if (a == "-ub" || a == "--ubatch-size")        { if (!(v = next("-ub")))          return false; o.n_ubatch = (uint32_t) atoi(v); }
        else if (a == "--lr" || a == "-lr")                 { if (!(v = next("--lr")))         return false; o.lr = strtof(v, nullptr); }
        else if (a == "--wd" || a == "-wd")                 { if (!(v = next("--wd")))         return false; o.wd = strtof(v, nullptr); }
        else if (a == "--epochs" || a == "-e")              { if (!(v = next("--epochs")))     return false; o.epochs = atoi(v); }
        else if (a == "--val-split" || a == "-val")         { if (!(v = next("--val-split")))  return false; o.val_split = strtof(v, nullptr); }
        else if (a == "-t" || a == "--threads")             { if (!(v = next("-t")))           return false; o.threads = atoi(v); }
        else { fprintf(stderr, "error: unknown argument '%s'\n", a.c_str()); return false; }
    }
    if (o.model.empty() || o.files.empty()) {
        fprintf(stderr, "error: -m MODEL and at least one -f TEXT are required\n");
        return false;
    }
    if (o.optimizer != "sgd" && o.optimizer != "adamw") {
        fprintf(stderr, "error: --optimizer must be sgd or adamw, got '%s'\n", o.optimizer.c_str());
        return false;
    }
    if (o.n_ubatch == 0 || o.n_batch == 0 || o.n_batch % o.n_ubatch != 0 || o.n_ctx % o.n_batch != 0) {
        fprintf(stderr, "error: need n_ubatch | n_batch | n_ctx, got n_ctx=%u n_batch=%u n_ubatch=%u\n", o.n_ctx, o.n_batch, o.n_ubatch);
        return false;
    }
    if (!(o.lr > 0.0f) || o.wd < 0.0f || o.wd > 1.0f || o.epochs < 1 || !(o.val_split > 0.0f && o.val_split < 1.0f) || o.threads < 1) {
        fprintf(stderr, "error: need lr > 0, 0 <= wd <= 1, epochs >= 1, 0 < val-split < 1, threads >= 1\n");
        return false;
    }
    return true;
}

bool read_files(const std::vector<std::string> & files, std::string & text) {
    for (const auto & f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) {
            fprintf(stderr, "error: cannot read data file '%s'\n", f.c_str());
            return false;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        if (!text.empty()) {
            text += "\n";
        }
        text += ss.str();
    }
    return true;
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text) {
    // add_special = true: BOS as finetune.cpp's common_tokenize(ctx, prompt, true) adds it
    int32_t n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, true, false);
    std::vector<llama_token> tokens(n > 0 ? n : 0);
    if (n > 0 && llama_tokenize(vocab, text.data(), (int32_t) text.size(), tokens.data(), n, true, false) != n) {
        tokens.clear();
    }
    return tokens;
}

// same as common_opt_dataset_init: datapoint i is tokens[i*stride, i*stride + n_ctx), labels shifted by one
ggml_opt_dataset_t dataset_init(const std::vector<llama_token> & tokens, int64_t n_ctx, int64_t stride) {
    const int64_t ndata = ((int64_t) tokens.size() - n_ctx - 1) / stride;
    if (ndata < 2) {
        return nullptr;
    }
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_I32, GGML_TYPE_I32, n_ctx, n_ctx, ndata, /*ndata_shard =*/ 1);
    llama_token * data   = (llama_token *) ggml_opt_dataset_data(ds)->data;
    llama_token * labels = (llama_token *) ggml_opt_dataset_labels(ds)->data;
    for (int64_t i = 0; i < ndata; ++i) {
        memcpy(data   + i*n_ctx, tokens.data() + i*stride + 0, n_ctx*sizeof(llama_token));
        memcpy(labels + i*n_ctx, tokens.data() + i*stride + 1, n_ctx*sizeof(llama_token));
    }
    return ds;
}

ggml_opt_optimizer_params constant_lr(void * userdata) {
    return ((lr_state *) userdata)->params;
}

void log_filter(enum ggml_log_level level, const char * text, void * userdata) {
    const bool verbose = *(const bool *) userdata;
    if (verbose || level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

double loss_of(ggml_opt_result_t r) {
    double loss = NAN, unc = NAN;
    ggml_opt_result_loss(r, &loss, &unc);
    return loss;
}

double accuracy_of(ggml_opt_result_t r) {
    double acc = NAN, unc = NAN;
    ggml_opt_result_accuracy(r, &acc, &unc);
    return acc;
}

} // namespace

int main(int argc, char ** argv) {
    std::setlocale(LC_NUMERIC, "C");
    options o;
    if (!parse_args(argc, argv, o)) {
        usage(argv[0]);
        return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();

    llama_log_set(log_filter, &o.verbose);
    llama_backend_init();

    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = 0;
    mparams.load_mode    = LLAMA_LOAD_MODE_NONE; // as finetune.cpp: writable weights, no mmap
    llama_model * model = llama_model_load_from_file(o.model.c_str(), mparams);
    if (!model) {
        fprintf(stderr, "error: cannot load model '%s'\n", o.model.c_str());
        return 2;
    }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx           = o.n_ctx;
    cparams.n_batch         = o.n_batch;
    cparams.n_ubatch        = o.n_ubatch;
    cparams.n_threads       = o.threads;
    cparams.n_threads_batch = o.threads;
    cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cparams.type_k          = GGML_TYPE_F32; // as finetune.cpp: OUT_PROD has no f16 support
    cparams.type_v          = GGML_TYPE_F32;
    cparams.no_perf         = true;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "error: cannot create a context for '%s'\n", o.model.c_str());
        return 2;
    }
    if (llama_n_ctx(ctx) != o.n_ctx) {
        fprintf(stderr, "error: the context has n_ctx=%u, asked for %u (llama pads n_ctx to a multiple of 256)\n", llama_n_ctx(ctx), o.n_ctx);
        return 2;
    }

    std::string text;
    if (!read_files(o.files, text)) {
        return 2;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const std::vector<llama_token> tokens = tokenize(vocab, text);
    ggml_opt_dataset_t dataset = dataset_init(tokens, o.n_ctx, o.n_ctx / 2);
    if (!dataset) {
        fprintf(stderr, "error: %zu tokens make fewer than 2 datapoints of %u tokens\n", tokens.size(), o.n_ctx);
        return 2;
    }
    const int64_t ndata       = ggml_opt_dataset_ndata(dataset);
    const int64_t idata_split = (int64_t) (ndata * (1.0f - o.val_split)); // as finetune.cpp
    if (idata_split < 1 || idata_split >= ndata) {
        fprintf(stderr, "error: val-split %g of %lld datapoints leaves an empty train or eval set\n", (double) o.val_split, (long long) ndata);
        return 2;
    }

    lr_state lr;
    lr.params = ggml_opt_get_default_optimizer_params(nullptr);
    lr.params.adamw.alpha = lr.params.sgd.alpha = o.lr; // as common_opt_lr_pars with a constant lr
    lr.params.adamw.wd    = lr.params.sgd.wd    = o.wd;

    llama_opt_params lopt{
        /*n_ctx_train     =*/ 0,
        /*param_filter    =*/ llama_opt_param_filter_all,
        /*param_filter_ud =*/ nullptr,
        /*get_opt_pars    =*/ constant_lr,
        /*get_opt_pars_ud =*/ &lr,
        /*optimizer_type  =*/ o.optimizer == "sgd" ? GGML_OPT_OPTIMIZER_TYPE_SGD : GGML_OPT_OPTIMIZER_TYPE_ADAMW,
    };
    llama_opt_init(ctx, model, lopt);

    const unsigned opt_period = o.n_batch / o.n_ubatch;
    printf("config model=%s n_vocab=%d n_ctx=%u n_batch=%u n_ubatch=%u opt_period=%u optimizer=%s lr=%g wd=%g tokens=%zu ndata=%lld ndata_train=%lld ndata_eval=%lld threads=%d\n",
           o.model.c_str(), llama_vocab_n_tokens(vocab), o.n_ctx, o.n_batch, o.n_ubatch, opt_period, o.optimizer.c_str(),
           (double) o.lr, (double) o.wd, tokens.size(), (long long) ndata, (long long) idata_split, (long long) (ndata - idata_split), o.threads);
    fflush(stdout);

    ggml_opt_result_t result_train = ggml_opt_result_init();
    ggml_opt_result_t result_eval  = ggml_opt_result_init();
    double train_loss = NAN, eval_loss = NAN;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        llama_opt_epoch(ctx, dataset, result_train, result_eval, idata_split, nullptr, nullptr);
        train_loss = loss_of(result_train);
        eval_loss  = loss_of(result_eval);
        printf("epoch=%d train_loss=%.8g eval_loss=%.8g train_acc=%.6g eval_acc=%.6g optimizer=%s opt_period=%u\n",
               epoch, train_loss, eval_loss, accuracy_of(result_train), accuracy_of(result_eval), o.optimizer.c_str(), opt_period);
        fflush(stdout);
        ggml_opt_result_reset(result_train);
        ggml_opt_result_reset(result_eval);
    }
    ggml_opt_result_free(result_train);
    ggml_opt_result_free(result_eval);
    ggml_opt_dataset_free(dataset);

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("done epochs=%d train_loss=%.8g eval_loss=%.8g seconds=%.3f\n", o.epochs, train_loss, eval_loss, seconds);

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
