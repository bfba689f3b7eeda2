/*
 * train_dp's model: forward, backward with a per-layer callback, SGD, the
 * teacher and the data generator (see train_mlp.h for the layout).
 *
 * Loop orders are chosen for the cache (a weight row stays in L1 while the
 * batch streams through L2) and fixed: every sum runs over the same indices
 * in the same order on every rank, so equal inputs give equal bits. The
 * backward pass writes layer l's gradient before it computes the error of
 * layer l-1, which is what lets train_dp all-reduce the gradient while the
 * host keeps working on the layers below.
 */
#include "train_mlp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t train_rng_next(uint64_t *state)
{
    /* splitmix64: every output is a bijective mix of a counter. */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), 24 random bits: exact in a float. */
static float train_rng_uniform(uint64_t *state)
{
    return (float)(train_rng_next(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static void train_fill_uniform(float *p, size_t n, float scale, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = scale * train_rng_uniform(state);
    }
}

/* Dot product with eight partial sums in a fixed order: fast and deterministic. */
static float train_dot(const float *a, const float *b, int n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; k++) {
            acc[k] += a[i + k] * b[i + k];
        }
    }
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) {
        s += a[i] * b[i];
    }
    return s;
}

static void train_axpy(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++) {
        y[i] += a * x[i];
    }
}

size_t train_mlp_count(int nlayers, const int *dims)
{
    size_t n = 0;
    for (int l = 0; l < nlayers; l++) {
        n += (size_t)dims[l + 1] * (size_t)dims[l] + (size_t)dims[l + 1];
    }
    return n;
}

int train_mlp_init(train_mlp_t *m, int nlayers, const int *dims, int max_batch, float *grads,
                   uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    if (nlayers < 1 || nlayers > TRAIN_MAX_LAYERS || max_batch < 1 || grads == NULL) {
        return -1;
    }
    int maxdim = 0;
    for (int l = 0; l <= nlayers; l++) {
        if (dims[l] < 1) {
            return -1;
        }
        m->dims[l] = dims[l];
        maxdim = dims[l] > maxdim ? dims[l] : maxdim;
    }
    m->nlayers = nlayers;
    m->max_batch = max_batch;
    m->nparams = train_mlp_count(nlayers, dims);
    /* Layer L-1 first: the backward pass finishes the buffer's front first. */
    size_t off = 0;
    for (int l = nlayers - 1; l >= 0; l--) {
        m->offset[l] = off;
        off += (size_t)dims[l + 1] * (size_t)dims[l] + (size_t)dims[l + 1];
    }
    m->params = malloc(m->nparams * sizeof(float));
    m->grads = grads;
    m->delta = malloc((size_t)max_batch * (size_t)maxdim * sizeof(float));
    m->delta_prev = malloc((size_t)max_batch * (size_t)maxdim * sizeof(float));
    int ok = m->params != NULL && m->delta != NULL && m->delta_prev != NULL;
    for (int l = 0; l <= nlayers; l++) {
        m->act[l] = malloc((size_t)max_batch * (size_t)dims[l] * sizeof(float));
        ok = ok && m->act[l] != NULL;
    }
    if (!ok) {
        train_mlp_free(m);
        return -1;
    }
    uint64_t state = seed;
    for (int l = 0; l < nlayers; l++) {
        float *w = m->params + m->offset[l];
        size_t nw = (size_t)dims[l + 1] * (size_t)dims[l];
        /* Variance 1/fan_in keeps tanh layers out of saturation. */
        train_fill_uniform(w, nw, sqrtf(3.0f / (float)dims[l]), &state);
        memset(w + nw, 0, (size_t)dims[l + 1] * sizeof(float));
    }
    memset(grads, 0, m->nparams * sizeof(float));
    return 0;
}

void train_mlp_free(train_mlp_t *m)
{
    free(m->params);
    free(m->delta);
    free(m->delta_prev);
    for (int l = 0; l <= TRAIN_MAX_LAYERS; l++) {
        free(m->act[l]);
    }
    memset(m, 0, sizeof(*m));
}

double train_mlp_forward(train_mlp_t *m, const float *x, const float *target, int batch)
{
    memcpy(m->act[0], x, (size_t)batch * (size_t)m->dims[0] * sizeof(float));
    for (int l = 0; l < m->nlayers; l++) {
        int in = m->dims[l];
        int out = m->dims[l + 1];
        const float *w = m->params + m->offset[l];
        const float *b = w + (size_t)out * (size_t)in;
        const float *h = m->act[l];
        float *z = m->act[l + 1];
        int hidden = l + 1 < m->nlayers;
        for (int o = 0; o < out; o++) {
            const float *wrow = w + (size_t)o * (size_t)in;
            for (int s = 0; s < batch; s++) {
                float v = b[o] + train_dot(wrow, h + (size_t)s * (size_t)in, in);
                z[(size_t)s * (size_t)out + (size_t)o] = hidden ? tanhf(v) : v;
            }
        }
    }
    int nout = m->dims[m->nlayers];
    const float *y = m->act[m->nlayers];
    double loss = 0.0;
    for (int s = 0; s < batch; s++) {
        float e = 0.0f;
        for (int o = 0; o < nout; o++) {
            size_t k = (size_t)s * (size_t)nout + (size_t)o;
            float d = y[k] - target[k];
            e += 0.5f * d * d;
        }
        loss += e;
    }
    return loss / batch;
}

void train_mlp_backward(train_mlp_t *m, const float *target, int batch, train_layer_done_fn done,
                        void *arg)
{
    int L = m->nlayers;
    int nout = m->dims[L];
    const float *y = m->act[L];
    float inv = 1.0f / (float)batch;
    for (size_t i = 0; i < (size_t)batch * (size_t)nout; i++) {
        m->delta[i] = (y[i] - target[i]) * inv;
    }
    for (int l = L - 1; l >= 0; l--) {
        int in = m->dims[l];
        int out = m->dims[l + 1];
        const float *h = m->act[l];
        const float *w = m->params + m->offset[l];
        float *gw = m->grads + m->offset[l];
        float *gb = gw + (size_t)out * (size_t)in;
        for (int o = 0; o < out; o++) {
            float *grow = gw + (size_t)o * (size_t)in;
            float bsum = 0.0f;
            memset(grow, 0, (size_t)in * sizeof(float));
            for (int s = 0; s < batch; s++) {
                float d = m->delta[(size_t)s * (size_t)out + (size_t)o];
                train_axpy(grow, d, h + (size_t)s * (size_t)in, in);
                bsum += d;
            }
            gb[o] = bsum;
        }
        if (done != NULL) {
            done(l, arg);
        }
        if (l == 0) {
            break;
        }
        /* Error of the layer below: (delta W) scaled by tanh' = 1 - h^2. */
        memset(m->delta_prev, 0, (size_t)batch * (size_t)in * sizeof(float));
        for (int o = 0; o < out; o++) {
            const float *wrow = w + (size_t)o * (size_t)in;
            for (int s = 0; s < batch; s++) {
                train_axpy(m->delta_prev + (size_t)s * (size_t)in,
                           m->delta[(size_t)s * (size_t)out + (size_t)o], wrow, in);
            }
        }
        for (size_t i = 0; i < (size_t)batch * (size_t)in; i++) {
            m->delta_prev[i] *= 1.0f - h[i] * h[i];
        }
        float *t = m->delta;
        m->delta = m->delta_prev;
        m->delta_prev = t;
    }
}

void train_mlp_update(train_mlp_t *m, float lr, float scale)
{
    float k = lr * scale;
    for (size_t i = 0; i < m->nparams; i++) {
        m->params[i] -= k * m->grads[i];
    }
}

uint64_t train_mlp_hash(const train_mlp_t *m)
{
    const unsigned char *p = (const unsigned char *)m->params;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < m->nparams * sizeof(float); i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

int train_teacher_init(train_teacher_t *t, int in, int hidden, int out, uint64_t seed)
{
    memset(t, 0, sizeof(*t));
    t->in = in;
    t->hidden = hidden;
    t->out = out;
    t->seed = seed;
    t->w1 = malloc((size_t)hidden * (size_t)in * sizeof(float));
    t->w2 = malloc((size_t)out * (size_t)hidden * sizeof(float));
    t->hid = malloc((size_t)hidden * sizeof(float));
    if (t->w1 == NULL || t->w2 == NULL || t->hid == NULL) {
        train_teacher_free(t);
        return -1;
    }
    uint64_t state = seed ^ 0x7EAC4E7ull;
    train_fill_uniform(t->w1, (size_t)hidden * (size_t)in, sqrtf(3.0f / (float)in) * 2.0f, &state);
    train_fill_uniform(t->w2, (size_t)out * (size_t)hidden, sqrtf(3.0f / (float)hidden), &state);
    return 0;
}

void train_teacher_free(train_teacher_t *t)
{
    free(t->w1);
    free(t->w2);
    free(t->hid);
    t->w1 = NULL;
    t->w2 = NULL;
    t->hid = NULL;
}

void train_teacher_batch(const train_teacher_t *t, uint64_t step, int first, int count, float *x,
                         float *target)
{
    float *hid = t->hid;
    for (int j = 0; j < count; j++) {
        uint64_t sample = (uint64_t)first + (uint64_t)j;
        uint64_t state =
            t->seed ^ (step * 0xD1B54A32D192ED03ull) ^ (sample * 0xABC98388FB8FAC03ull);
        float *xs = x + (size_t)j * (size_t)t->in;
        for (int i = 0; i < t->in; i++) {
            xs[i] = train_rng_uniform(&state);
        }
        for (int h = 0; h < t->hidden; h++) {
            hid[h] = tanhf(train_dot(t->w1 + (size_t)h * (size_t)t->in, xs, t->in));
        }
        for (int o = 0; o < t->out; o++) {
            target[(size_t)j * (size_t)t->out + (size_t)o] =
                train_dot(t->w2 + (size_t)o * (size_t)t->hidden, hid, t->hidden);
        }
    }
}
