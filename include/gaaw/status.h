/* gaaw status codes: one list, from which the enum, gaaw_status_string and the
 * Fortran parameters are generated. Append only; never renumber. */
#ifndef GAAW_STATUS_H
#define GAAW_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#define GAAW_STATUS_LIST(X)                                                            \
  X(GAAW_SUCCESS,          0,  "success")                                              \
  X(GAAW_ERR_INVALID_ARG, -1,  "invalid argument")                                     \
  X(GAAW_ERR_NO_MEMORY,   -2,  "out of memory")                                        \
  X(GAAW_ERR_UNSUPPORTED, -3,  "not supported by this backend or build")               \
  X(GAAW_ERR_BACKEND,     -4,  "device backend error")                                 \
  X(GAAW_ERR_COMM,        -5,  "communication error")                                  \
  X(GAAW_ERR_TIMEOUT,     -6,  "communication deadline expired")                       \
  X(GAAW_ERR_IO,          -7,  "input/output error")                                   \
  X(GAAW_ERR_CORRUPT,     -8,  "corrupt or truncated data")                            \
  X(GAAW_ERR_INTERNAL,    -9,  "internal error (a bug in gaaw)")                       \
  X(GAAW_ERR_VERSION,     -10, "header and library versions differ")                   \
  X(GAAW_ERR_STATE,       -11, "object used in the wrong state")                       \
  X(GAAW_ERR_NOT_FOUND,   -12, "no such name")
/* ... append only; never renumber ... */

#define GAAW_STATUS_ENUM_ENTRY(name, value, text) name = value,
typedef enum { GAAW_STATUS_LIST(GAAW_STATUS_ENUM_ENTRY) } gaaw_status_code;
#undef GAAW_STATUS_ENUM_ENTRY

/* Every gaaw function returns one of the codes above. */
typedef int gaaw_status_t;

/* A one-line English description of st ("unknown status" for other values).
 * Not collective. */
const char *gaaw_status_string(gaaw_status_t st);

/* The code's name as written in the list, e.g. "GAAW_ERR_TIMEOUT".
 * Not collective. */
const char *gaaw_status_name(gaaw_status_t st);

#ifdef __cplusplus
}
#endif
#endif
