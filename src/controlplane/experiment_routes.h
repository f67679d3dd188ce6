#pragma once
// Hyper-parameter experiments (controllers/experiment.h, docs/hpo.md); access.h says who may call each:
//
//   POST /v1/experiments {spec_yaml}                  -> 201 experiment                      member
//       The spec is checked whole (hpo::ParseExperimentSpec: 400 naming the field); the experiment
//       belongs to the caller's tenant and its trials are submitted as the caller.
//   GET  /v1/experiments?state=&after=&limit=         -> {experiments: [experiment], next_after}   viewer
//   GET  /v1/experiments/{id}?after=&limit=           -> experiment + {trials: [trial] (paged by number),
//       next_after, best_so_far [value per trial, null before the first complete], importance [{param,
//       share, eta_squared, trials}], best {number, value, params}}                                viewer
//   GET  /v1/experiments/{id}/trials/{number}         -> trial + {intermediate: [[step, value]]}   viewer
//   GET  /v1/experiments/{id}/export                  -> text/csv, one line per trial (hpo::TrialsCsv)  viewer
//   POST /v1/experiments/{id}/stop                    -> experiment (stopping)                    member
//       409 for an experiment that has ended.
//
// An experiment: {id, name, tenant, user, state (running | stopping | succeeded | stopped | failed),
// reason, metric, direction, budget {trials, gpu_seconds (0 = none)}, parallelism, sampler, pruner,
// counts {running, complete, pruned, failed}, gpu_seconds (metered, all trials), created_at, updated_at,
// spec_yaml}. A trial: {number, state, params {name: value}, value (complete only), job_id, reason,
// last_step, last_value, gpu_seconds}. Another tenant's experiment reads as absent (404).

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "controlplane/controllers/experiment.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// Registers the routes above. All must outlive the server's serving.
void RegisterExperimentRoutes(http::Server& server, Accounts& accounts, ControlPlane& control_plane,
                              store::Store& store, ExperimentController& experiments);

}  // namespace gpugeek::controlplane
