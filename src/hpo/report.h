#pragma once
// What a search has found, for people: the best-so-far curve, which parameters mattered, and every trial
// as CSV. Pure functions of a study's trials (losses, as Study::trials() holds them).

#include <string>
#include <vector>

#include "hpo/study.h"

namespace gpugeek::hpo {

// Per trial, in trial order: the lowest loss of a complete trial so far; NaN before the first.
std::vector<double> BestSoFar(Trials trials);

struct Importance {
  std::string param;
  int trials = 0;          // complete trials where the parameter is active
  double share = 0;        // eta^2 / the sum over parameters: 0..1, sums to 1 when any is above 0
  double eta_squared = 0;  // the fraction of the loss ranks' variance its bins explain alone, 0..1
};

// First-order importance of each parameter: the correlation ratio eta^2 (Pearson 1905; the first-order
// Sobol index estimated by binning, Saltelli et al. 2008, ch. 1) of the ranks of the complete trials'
// losses, grouped by the parameter's choice (categorical) or by equal-count bins of its value (numeric;
// ceil(sqrt(n)) bins, at most 10). Ranks, not losses, so that one huge loss does not decide it. Sorted by
// share, largest first. Fewer than 4 complete trials give all zeros.
std::vector<Importance> ParameterImportance(const SearchSpace& space, Trials trials);

// One line per trial: number,state,value,<each parameter>,last_step,last_intermediate, with the study's
// values (not losses: maximised objectives read as reported). Inactive parameters and missing values are
// empty; fields holding a comma, quote or line break are quoted (RFC 4180). Numbers print with up to 17
// significant digits, so a file read back gives the same doubles.
std::string TrialsCsv(const Study& study);

std::string_view TrialStateName(TrialState state);  // "running", "complete", "pruned", "failed"

}  // namespace gpugeek::hpo
