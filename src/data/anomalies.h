#pragma once
// Anomaly reports over records (records.h): what a person should look at before training on a dataset.
// Each check names its source:
//   length          robust z-score of log(1 + bytes) above `z_threshold`: the modified z-score
//                   0.6745 (x - median) / MAD of Iglewicz and Hoaglin ("How to Detect and Handle Outliers",
//                   ASQC 1993), which flags |z| > 3.5; medians, unlike means, are not dragged by the outliers
//   numeric:<field> the same on every numeric field (JSON numbers; CSV cells that parse whole as numbers)
//   charset         text that is not UTF-8, or with more than `control_fraction` control characters
//                   (other than tab, line feed, carriage return)
//   repeated_lines  more than `repeated_line_fraction` of a record's non-blank lines repeat an earlier one
//                   (Gopher's quality filter: 30% duplicate lines, Rae et al. 2021, "Scaling Language Models",
//                   Table A1)
// A field whose MAD is 0 (more than half the values equal) flags nothing: the score is undefined there.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "data/records.h"

namespace gpugeek::data {

struct AnomalyOptions {
  double z_threshold = 3.5;
  double control_fraction = 0.01;
  double repeated_line_fraction = 0.3;
  size_t min_lines_for_repeats = 4;  // records with fewer non-blank lines are not judged
};

struct Anomaly {
  size_t record = 0;   // index into the records
  std::string kind;    // "length", "numeric:<field>", "charset", "repeated_lines"
  std::string detail;  // the measured value against the limit, for the report
};

// The median and the median absolute deviation of `values` (copied; sorted inside). {0, 0} when empty.
struct MedianMad {
  double median = 0, mad = 0;
};
MedianMad RobustSpread(std::vector<double> values);

// Every anomaly, ordered by record then kind.
std::vector<Anomaly> FindAnomalies(std::span<const Record> records, const AnomalyOptions& options = {});

}  // namespace gpugeek::data
