/* Symbol visibility: everything is hidden (-fvisibility=hidden) unless marked. */
#ifndef ZC_EXPORT_H
#define ZC_EXPORT_H
#define ZC_EXPORT __attribute__((visibility("default")))
#define ZC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ZC_CACHELINE 64
#define ZC_ALIGN_UP(x, a) (((x) + ((a)-1)) / (a) * (a))
#define ZC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ZC_MAX(a, b) ((a) > (b) ? (a) : (b))
#endif
