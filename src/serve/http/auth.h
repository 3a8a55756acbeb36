// --api-key: every request carries `Authorization: Bearer KEY`. The comparison takes the same
// time whatever the first wrong byte is, so the key cannot be guessed byte by byte by timing.
#pragma once

#include <string_view>

namespace tunableop::serve::http {

// a == b, in time that depends on b's length only (b: the secret).
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether the Authorization header's value presents `key` ("Bearer KEY"; the scheme's case is
// free, as RFC 7235 says).
bool bearer_matches(std::string_view header, std::string_view key);

}  // namespace tunableop::serve::http
