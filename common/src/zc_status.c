#include "zc/status.h"

const char *zc_status_str(zc_status_t st)
{
    switch (st) {
#define ZC_STATUS_CASE(name, value, text)                                                          \
    case name:                                                                                     \
        return text;
        ZC_STATUS_LIST(ZC_STATUS_CASE)
#undef ZC_STATUS_CASE
    }
    return "unknown status";
}
