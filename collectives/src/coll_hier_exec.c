/*
 * The hierarchical schedules' executor (coll_hier_exec.h): resolve, move,
 * or count.
 */
#include "coll_hier_exec.h"

#include <string.h>

/* Broadcast's root buffer may be named by out[root] alone (coll.h). */
static const char *hx_in_ptr(const hx_t *x, int r)
{
    const void *p = x->a->in[r];
    return p != NULL ? p : (const char *)x->a->out[r];
}

static char *hx_ptr(const hx_t *x, hx_loc_t l)
{
    char *base;
    switch (l.kind) {
    case HX_IN:
        base = (char *)(uintptr_t)hx_in_ptr(x, l.rank);
        break;
    case HX_OUT:
        base = l.rank == x->me ? x->out_me : x->a->out[l.rank];
        break;
    default: /* HX_SCR, HX_PART */
        base = x->scr[l.rank];
        break;
    }
    return base + l.off;
}

/* Counting: bytes of a range of rank r's memory that this rank touches,
 * when r lies in another group of the counted grouping. */
static void hx_count(hx_t *x, int r, size_t bytes, uint64_t *to)
{
    if (x->across->group_of[r] != x->across->group_of[x->me]) {
        *to += bytes;
    }
}

/* Element size at l: a partial's, or the dtype's. */
static size_t hx_es(const hx_t *x, hx_loc_t l)
{
    return l.kind == HX_PART ? x->pes : x->es;
}

/* The dtype of elements at l (fp32 for wide partials). */
static int hx_dt(const hx_t *x, hx_loc_t l)
{
    return hx_es(x, l) != x->es ? COLL_FP32 : x->dtype;
}

void hx_reduce(hx_t *x, hx_loc_t dst, const hx_loc_t *src, int n, size_t elems)
{
    if (elems == 0) {
        return;
    }
    if (x->cnt != NULL) {
        for (int i = 0; i < n; i++) {
            hx_count(x, src[i].rank, elems * hx_es(x, src[i]), &x->cnt->read);
        }
        hx_count(x, dst.rank, elems * hx_es(x, dst), &x->cnt->written);
        return;
    }
    for (int i = 0; i < n; i++) {
        x->ptrs[i] = hx_ptr(x, src[i]);
    }
    coll_reduce_wide(hx_ptr(x, dst), hx_dt(x, dst), x->ptrs, hx_dt(x, src[0]), n, elems, x->op);
}

void hx_copy(hx_t *x, hx_loc_t dst, hx_loc_t src, size_t elems)
{
    size_t bytes = elems * x->es;
    if (bytes == 0) {
        return;
    }
    if (x->cnt != NULL) {
        hx_count(x, src.rank, bytes, &x->cnt->read);
        hx_count(x, dst.rank, bytes, &x->cnt->written);
        return;
    }
    coll_copy(hx_ptr(x, dst), hx_ptr(x, src), bytes, 0);
}

int hx_barrier(hx_t *x)
{
    x->nbar++;
    if (x->cnt != NULL) {
        return ZC_OK;
    }
    x->st = coll_barrier(x->a);
    return x->st;
}
