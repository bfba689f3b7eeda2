/*
 * The model and data of train_dp: a small fully connected network (tanh
 * hidden layers, linear output, half squared error) trained on synthetic data
 * labelled by a fixed random teacher network. Host code only, deterministic:
 * the same seed, step and sample index give the same bits on every rank, and
 * every loop sums in a fixed order.
 *
 * Parameters and gradients share one layout: layer L-1 first, layer 0 last
 * (each layer: W, out x in row-major, then b), so the gradients of the layers
 * the backward pass finishes first form the first buckets of one contiguous
 * buffer. The gradient buffer is the caller's (train_dp puts it in activated
 * memory and all-reduces it in place).
 */
#ifndef TRAIN_MLP_H
#define TRAIN_MLP_H

#include <stddef.h>
#include <stdint.h>

#define TRAIN_MAX_LAYERS 8

/** The student network being trained. */
typedef struct train_mlp {
    int nlayers;                     /**< weight layers */
    int dims[TRAIN_MAX_LAYERS + 1];  /**< dims[0] inputs ... dims[nlayers] outputs */
    size_t offset[TRAIN_MAX_LAYERS]; /**< floats before layer l's W in params/grads */
    size_t nparams;                  /**< floats in params (and grads) */
    float *params;                   /**< owned */
    float *grads;                    /**< the caller's, nparams floats */
    int max_batch;
    float *act[TRAIN_MAX_LAYERS + 1]; /**< activations, batch x dims[l] (act[0] = input) */
    float *delta;                     /**< dLoss/dZ of the current layer, batch x max dim */
    float *delta_prev;                /**< the same for the layer below */
} train_mlp_t;

/** The fixed teacher that labels the data. */
typedef struct train_teacher {
    int in, hidden, out;
    float *w1, *w2; /**< hidden x in, out x hidden */
    float *hid;     /**< scratch: one sample's hidden layer */
    uint64_t seed;
} train_teacher_t;

/** Called when layer l's gradient is final in grads (backward order: L-1 first). */
typedef void (*train_layer_done_fn)(int layer, void *arg);

/**
 * Build a network with random weights from seed (the same on every rank).
 * grads: nparams floats the caller provides (see train_mlp_count()).
 * @return 0, or -1 when dims are out of range or memory runs out.
 */
int train_mlp_init(train_mlp_t *m, int nlayers, const int *dims, int max_batch, float *grads,
                   uint64_t seed);

/** Free what train_mlp_init() allocated (not grads). */
void train_mlp_free(train_mlp_t *m);

/** Floats of parameters a network of these dims has. */
size_t train_mlp_count(int nlayers, const int *dims);

/**
 * Forward pass over `batch` samples x (batch x dims[0]); returns the mean over
 * the batch of 0.5 * sum over outputs of (y - target)^2, and keeps what the
 * backward pass needs.
 */
double train_mlp_forward(train_mlp_t *m, const float *x, const float *target, int batch);

/**
 * Backward pass of the last forward: grads = d(mean loss)/d(params), layer by
 * layer from the last; done(l, arg) runs as soon as layer l's gradient is
 * written (may be NULL).
 */
void train_mlp_backward(train_mlp_t *m, const float *target, int batch, train_layer_done_fn done,
                        void *arg);

/** SGD: params -= lr * scale * grads. */
void train_mlp_update(train_mlp_t *m, float lr, float scale);

/** FNV-1a hash of the parameter bytes (bitwise identity across ranks). */
uint64_t train_mlp_hash(const train_mlp_t *m);

/** Teacher with random weights from seed; 0 or -1. */
int train_teacher_init(train_teacher_t *t, int in, int hidden, int out, uint64_t seed);
void train_teacher_free(train_teacher_t *t);

/**
 * Samples first .. first+count-1 of step `step`: inputs uniform in [-1, 1]
 * from (seed, step, sample) alone, targets from the teacher. Not thread-safe
 * (uses the teacher's scratch).
 */
void train_teacher_batch(const train_teacher_t *t, uint64_t step, int first, int count, float *x,
                         float *target);

#endif /* TRAIN_MLP_H */
