// Planted: a path that climbs out of its folder.
#include "../core/file_lock.h"
