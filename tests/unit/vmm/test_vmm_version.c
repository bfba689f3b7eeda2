/*
 * Versions: zccl/version.h (the release, from the project version) and
 * aclrtGetVersion (the ACL interface version of acl/acl.h, as in CANN).
 *
 * aclrtGetVersion with a NULL pointer returns ACL_ERROR_INVALID_PARAM, writes
 * nothing and logs exactly one line (tests/common/zt_logcount.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "acl/acl.h"
#include "zccl/version.h"
#include "zt_logcount.h"

#include <stdio.h>
#include <string.h>

static void test_version_header(void **state)
{
    (void)state;
    char text[32];
    snprintf(text, sizeof(text), "%d.%d.%d", ZCCL_VERSION_MAJOR, ZCCL_VERSION_MINOR,
             ZCCL_VERSION_PATCH);
    assert_string_equal(text, ZCCL_VERSION_STRING);
    assert_int_equal(ZCCL_VERSION_CODE,
                     ZCCL_VERSION_MAJOR * 10000 + ZCCL_VERSION_MINOR * 100 + ZCCL_VERSION_PATCH);
    assert_true(ZCCL_VERSION_CODE >= ZCCL_VERSION_NUM(0, 1, 0));
    assert_true(ZCCL_VERSION_NUM(0, 2, 0) > ZCCL_VERSION_NUM(0, 1, 99));
}

static void test_acl_version(void **state)
{
    (void)state;
    int32_t major = -1;
    int32_t minor = -1;
    int32_t patch = -1;
    assert_int_equal(aclrtGetVersion(&major, &minor, &patch), ACL_SUCCESS);
    assert_int_equal(major, ACL_MAJOR_VERSION);
    assert_int_equal(minor, ACL_MINOR_VERSION);
    assert_int_equal(patch, ACL_PATCH_VERSION);
}

static void test_acl_version_null(void **state)
{
    (void)state;
    int32_t a = -1;
    int32_t b = -1;
    ZT_EXPECT_ERR(aclrtGetVersion(NULL, &a, &b), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtGetVersion(&a, NULL, &b), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtGetVersion(&a, &b, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(a, -1);
    assert_int_equal(b, -1);
}

int main(void)
{
    zt_lg_open("version");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_header),
        cmocka_unit_test(test_acl_version),
        cmocka_unit_test(test_acl_version_null),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zt_lg_close();
    return rc;
}
