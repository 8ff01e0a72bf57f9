/* Status names and texts, generated from GAAW_STATUS_LIST. */
#include "gaaw/status.h"

const char *gaaw_status_string(gaaw_status_t st)
{
#define GAAW_STATUS_TEXT_CASE(name, value, text) \
  case value: return text;
  switch (st) { GAAW_STATUS_LIST(GAAW_STATUS_TEXT_CASE) }
#undef GAAW_STATUS_TEXT_CASE
  return "unknown status";
}

const char *gaaw_status_name(gaaw_status_t st)
{
#define GAAW_STATUS_NAME_CASE(name, value, text) \
  case value: return #name;
  switch (st) { GAAW_STATUS_LIST(GAAW_STATUS_NAME_CASE) }
#undef GAAW_STATUS_NAME_CASE
  return "GAAW_UNKNOWN_STATUS";
}
