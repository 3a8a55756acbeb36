// The statistics sidecar "<results file>.stats": one line per appended entry,
//   OP,PARAMS,SOLUTION,min_ms,median_ms,mean_ms,std_ms,runs,tuning_ms[,note[,final_rounds,sm_mhz,power_w]]
// (the note: why the entry is what it is; final_rounds: "sustained" or "burst", with the
// device's SM clock and board power during them, empty when unknown: ResultEntry),
// kept apart from the results file because PyTorch's parser wants exactly four columns there.
// Internal to the library and the CLI (show, merge); defined in results_format.cc.
#pragma once

#include <string>
#include <vector>

#include "tunableop/results.h"

namespace tunableop {

std::string stats_path_for(const std::string& results_path);

// One line, with its newline; entries without stats format as "".
std::string format_stats_line(const ResultEntry& e);

// Entries with `stats` and `tuning_ms` set (time_ms = median). Malformed lines are skipped and
// described in `malformed` ("path:LINE: reason") when it is given.
std::vector<ResultEntry> parse_stats(const std::string& text, const std::string& path_for_messages,
                                     std::vector<std::string>* malformed = nullptr);

// The problems of an untuned file, for offline tuning (`tunableop tune`): "OP,PARAMS" lines;
// results-file lines work too (their first two fields; Validator lines are skipped). Blank
// lines and a UTF-8 byte order mark are ignored, repeated problems kept once, and each malformed
// line described in `malformed` ("path:LINE: expected OP,PARAMS, found '...'") and skipped.
std::vector<std::pair<std::string, std::string>> parse_problem_list(const std::string& text, const std::string& path,
                                                                    std::vector<std::string>* malformed);

// The "<stem>.env-<hash>" sibling that keeps results of an environment whose validators differ
// from the requested file's. `index` > 1 adds "-<index>" (only needed on a hash collision).
std::string env_sibling_path(const std::string& path, const Validators& current, int index = 1);

// Stable 32-bit FNV-1a of the validators (sanitised, order-insensitive), as 8 hex digits.
std::string validators_hash(const Validators& v);

// What format_validators writes for a key or value: commas and line breaks cannot survive the
// CSV, so they are replaced. Comparisons with a file's values must use this form.
std::string sanitize_field(const std::string& s);

}  // namespace tunableop
