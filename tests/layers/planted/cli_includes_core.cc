// Planted: the CLI including core internals instead of the public results API.
#include "core/file_lock.h"
