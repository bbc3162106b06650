// PandemicEconomy step: S regions (agents 0..S-1) and one planner (agent S)
// of a synthetic pandemic-and-economy benchmark (see pandemic_economy.py for
// the model, its parameters and what it is not).
//
// One block per environment replica; the step is written as phases over the
// env's agents (WD_FOR_EACH_AGENT, <warp_drive/agents.h>) separated by
// env-wide barriers, so it is correct for any number of threads per env:
//
//   1. decisions  each region applies its stringency action (cooldown rules),
//                 pushes its level into the delay ring and its level change
//                 into the unemployment ring; the planner (agent S) applies
//                 its subsidy action on decision steps;
//   2. regions    each region's SIR-with-vaccination day, unemployment (the
//                 dense filter: K exponential filters over the last L level
//                 changes), output, raw health and economic indices, reward,
//                 feature row, own observation and next action mask;
//   3. planner    national sums over the regions (in region order), the
//                 planner's reward, observation (every region's features) and
//                 next action mask.
//
// Only region s writes region s's rows; the planner writes the env's
// subsidy_level (phase 1) and the national block (phase 3).
//
// Float math: single precision, every operation rounded on its own (the cpu
// build has -ffp-contract=off, nvcc --fmad=false), exp and log through the
// portable wd_expf / wd_logf, sums in a fixed order, so the GPU, the cpu
// executor and the NumPy reference compute the same bits.
#include <warp_drive/core.h>

namespace {

// Columns of region_params (S, PE_REGION_COLUMNS), written by the host.
enum {
  PE_POP_SHARE = 0,     // N_s / sum N
  PE_WORK_FRACTION,     // working-age share of the population
  PE_BASE_UNEMPLOYMENT, // unemployment with no level changes
  PE_DEATH_SHARE,       // mu_s: share of removals that are deaths
  PE_ALPHA,             // alpha_s: weight of health in the reward
  PE_ONE_MINUS_ALPHA,
  PE_OUTPUT_OPEN,       // per-capita daily output with no pandemic cost: the ratio's denominator
  PE_HEALTH_LO,         // min-max bounds of the raw indices (lo and 1 / (hi - lo))
  PE_HEALTH_INV,
  PE_ECON_LO,
  PE_ECON_INV,
  PE_REGION_COLUMNS
};

// Entries of national_params (PE_NATIONAL_COLUMNS,).
enum {
  PE_N_OUTPUT_OPEN = 0,
  PE_N_HEALTH_LO,
  PE_N_HEALTH_INV,
  PE_N_ECON_LO,
  PE_N_ECON_INV,
  PE_N_ALPHA,
  PE_N_ONE_MINUS_ALPHA,
  PE_NATIONAL_COLUMNS
};

constexpr int kFeatures = 10;  // per-region feature row (also the planner's view of a region)
constexpr float kLn2 = 0.693147182f;
constexpr float kMinConsumption = 1.0e-3f;

struct PandemicEnv {
  int s, levels, cooldown_steps, subsidy_levels, period, delay, memory, filters;
  int t, episode_length;
  // per-env state
  int* level;          // (S,)
  int* cooldown;       // (S,)
  int* lagged_level;   // (S,)
  int* level_ring;     // (S, delay)
  float* change_ring;  // (S, 2 * memory): day t's change at slot memory - 1 - t % memory and memory later
  float* susceptible;  // (S,) fractions of the population
  float* infected;
  float* removed;
  float* vaccinated;
  float* deaths;
  float* cum_infected;
  float* unemployment;
  float* output;       // (S,) per-capita output
  float* subsidy;      // (S,) per-capita subsidy
  float* health_raw;
  float* econ_raw;
  float* features;     // (S, kFeatures)
  float* national;     // (4,)
  int* subsidy_level;  // (1,)
  float* obs_regions;  // (S, obs_regions_size)
  float* obs_planner;  // (obs_planner_size,)
  float* rewards_regions;  // (S,)
  float* reward_planner;   // (1,)
  int* mask_regions;   // (S, levels + 1)
  int* mask_planner;   // (subsidy_levels + 1,)
  const int* actions_regions;  // (S,)
  const int* action_planner;   // (1,)
  // constants
  const float* beta_table;     // (S, levels + 1)
  const float* filter_table;   // (filters, memory)
  const float* filter_weights; // (S, filters)
  const float* region_params;  // (S, PE_REGION_COLUMNS)
  const float* national_params;
  float gamma, vaccination_rate, output_per_worker_day, subsidy_top_day, one_plus_r, one_minus_eta;
  int vaccination_start;
};

// CRRA utility of consumption c (relative to the open economy's): (c^(1-eta) - 1) / (1 - eta), log c at eta = 1.
__device__ __forceinline__ float pe_crra(float c, float one_minus_eta) {
  const float x = fmaxf(c, kMinConsumption);
  if (one_minus_eta == 0.0f) return wd_logf(x);
  return (wd_expf(one_minus_eta * wd_logf(x)) - 1.0f) / one_minus_eta;
}

// Steps until the planner's next decision step, over the period: 1 / P when step t + 1 decides.
__device__ __forceinline__ float pe_subsidy_timer(const PandemicEnv& e) {
  return (float)(e.period - (e.t - 1) % e.period) / (float)e.period;
}

// Phase 1, region s: the stringency decision.
__device__ __forceinline__ void pe_region_decide(const PandemicEnv& e, int s) {
  const int a = e.actions_regions[s];
  const int old_level = e.level[s];
  int new_level = old_level;
  int cd = e.cooldown[s];
  if (cd > 0) {
    cd = cd - 1;  // masked: the action is ignored
  } else if (a > 0 && a <= e.levels && a != old_level) {
    new_level = a;
    cd = e.cooldown_steps - 1;
  }
  int* ring = e.level_ring + (size_t)s * e.delay;
  const int slot = e.t % e.delay;
  e.lagged_level[s] = ring[slot];  // the level of day t - delay
  ring[slot] = new_level;
  float* changes = e.change_ring + (size_t)s * 2 * e.memory;
  const int newest = e.memory - 1 - e.t % e.memory;
  changes[newest] = changes[newest + e.memory] = (float)(new_level - old_level);
  e.level[s] = new_level;
  e.cooldown[s] = cd;
}

// Phase 1, the planner: the subsidy level, on decision steps only.
__device__ __forceinline__ void pe_planner_decide(const PandemicEnv& e) {
  const int a = e.action_planner[0];
  if ((e.t - 1) % e.period == 0 && a >= 0 && a <= e.subsidy_levels) e.subsidy_level[0] = a;
}

// One filter's sum over the taps, sum_{j<L} table[j] * history[j] (history[j]: the level change of day
// t - j), in a fixed order that is not one long chain: lane q (q = 0..7) adds the taps j = q, q + 8,
// q + 16, ... in turn, then the lanes are added in order q = 0..7. Eight independent chains overlap in
// the pipeline where one chain of L dependent additions would wait on each one (the reference, lane_sum
// in pandemic_economy.py, adds in the same order, so the bits match). The ring holds every change twice,
// L slots apart, newest first: the last L changes are one contiguous window, read in the table's
// direction (no wrap per tap, and two streams a compiler can pair up into vector loads).
#define PE_TAP(j) (table[(j)] * history[(j)])
__device__ __forceinline__ float pe_filter_sum(const float* table, const float* history, int L) {
  if (L < 8) {  // a lane per tap: the lanes in order are the taps in order
    float acc = PE_TAP(0);
    for (int j = 1; j < L; ++j) acc = acc + PE_TAP(j);
    return acc;
  }
  float a0 = PE_TAP(0), a1 = PE_TAP(1), a2 = PE_TAP(2), a3 = PE_TAP(3);
  float a4 = PE_TAP(4), a5 = PE_TAP(5), a6 = PE_TAP(6), a7 = PE_TAP(7);
  int j = 8;
  for (; j + 8 <= L; j += 8) {
    a0 = a0 + PE_TAP(j);
    a1 = a1 + PE_TAP(j + 1);
    a2 = a2 + PE_TAP(j + 2);
    a3 = a3 + PE_TAP(j + 3);
    a4 = a4 + PE_TAP(j + 4);
    a5 = a5 + PE_TAP(j + 5);
    a6 = a6 + PE_TAP(j + 6);
    a7 = a7 + PE_TAP(j + 7);
  }
  const int rest = L - j;  // 0..7 taps left: lanes 0..rest-1 take one more
  if (rest > 0) a0 = a0 + PE_TAP(j);
  if (rest > 1) a1 = a1 + PE_TAP(j + 1);
  if (rest > 2) a2 = a2 + PE_TAP(j + 2);
  if (rest > 3) a3 = a3 + PE_TAP(j + 3);
  if (rest > 4) a4 = a4 + PE_TAP(j + 4);
  if (rest > 5) a5 = a5 + PE_TAP(j + 5);
  if (rest > 6) a6 = a6 + PE_TAP(j + 6);
  return ((((((a0 + a1) + a2) + a3) + a4) + a5) + a6) + a7;
}
#undef PE_TAP

// The dense unemployment filter of region s: x = sum_k w_sk * (filter k's sum), filters in order.
__device__ __forceinline__ float pe_filter(const PandemicEnv& e, int s) {
  const float* history = e.change_ring + (size_t)s * 2 * e.memory + (e.memory - 1 - e.t % e.memory);
  float x = 0.0f;
  for (int k = 0; k < e.filters; ++k) {
    const float term = e.filter_weights[s * e.filters + k] *
                       pe_filter_sum(e.filter_table + (size_t)k * e.memory, history, e.memory);
    x = k == 0 ? term : x + term;
  }
  return x;
}

// Phase 2, region s: one day of health and economy, reward, features, observation, mask.
__device__ __forceinline__ void pe_region_day(const PandemicEnv& e, int s) {
  const float* p = e.region_params + (size_t)s * PE_REGION_COLUMNS;
  const float su = e.susceptible[s], in = e.infected[s], re = e.removed[s];
  const float va = e.vaccinated[s], de = e.deaths[s];
  const float beta = e.beta_table[s * (e.levels + 1) + e.lagged_level[s]];
  float new_inf = ((beta * su) * in) * (1.0f - va);
  new_inf = fminf(new_inf, su);
  const float new_rem = e.gamma * in;
  const float vac = e.t >= e.vaccination_start ? fminf(e.vaccination_rate, su - new_inf) : 0.0f;
  const float su2 = fmaxf((su - new_inf) - vac, 0.0f);
  const float in2 = fmaxf((in + new_inf) - new_rem, 0.0f);
  const float re2 = fmaxf((re + new_rem) + vac, 0.0f);
  const float new_deaths = p[PE_DEATH_SHARE] * new_rem;
  const float va2 = va + vac;
  const float de2 = de + new_deaths;
  e.susceptible[s] = su2;
  e.infected[s] = in2;
  e.removed[s] = re2;
  e.vaccinated[s] = va2;
  e.deaths[s] = de2;
  e.cum_infected[s] = e.cum_infected[s] + new_inf;

  // unemployment: base - ln 2 + softplus(x), clipped to [0, 1]
  const float x = pe_filter(e, s);
  const float softplus = fmaxf(x, 0.0f) + wd_logf(1.0f + wd_expf(-fabsf(x)));
  const float u = fminf(fmaxf((p[PE_BASE_UNEMPLOYMENT] - kLn2) + softplus, 0.0f), 1.0f);
  e.unemployment[s] = u;

  // economy, per capita: the able (alive, not sick, employed) working-age population's output, plus the subsidy
  const float able = fmaxf((1.0f - in2) - de2, 0.0f);
  const float y = ((p[PE_WORK_FRACTION] * (1.0f - u)) * able) * e.output_per_worker_day;
  const float sub = ((float)e.subsidy_level[0] / (float)e.subsidy_levels) * e.subsidy_top_day;
  e.output[s] = y;
  e.subsidy[s] = sub;
  const float health = -new_deaths;
  const float econ = pe_crra((y + sub) / p[PE_OUTPUT_OPEN], e.one_minus_eta);
  e.health_raw[s] = health;
  e.econ_raw[s] = econ;
  const float h_hat = (health - p[PE_HEALTH_LO]) * p[PE_HEALTH_INV];
  const float e_hat = (econ - p[PE_ECON_LO]) * p[PE_ECON_INV];
  e.rewards_regions[s] = p[PE_ALPHA] * h_hat + p[PE_ONE_MINUS_ALPHA] * e_hat;

  float* f = e.features + (size_t)s * kFeatures;
  const int cd = e.cooldown[s];
  f[0] = su2;
  f[1] = in2;
  f[2] = re2;
  f[3] = va2;
  f[4] = de2;
  f[5] = u;
  f[6] = y / p[PE_OUTPUT_OPEN];
  f[7] = (float)e.lagged_level[s] / (float)e.levels;
  f[8] = (float)e.level[s] / (float)e.levels;
  f[9] = (float)cd / (float)(e.cooldown_steps > 1 ? e.cooldown_steps - 1 : 1);

  const int obs_size = kFeatures + 3 + e.s;
  float* o = e.obs_regions + (size_t)s * obs_size;
  for (int i = 0; i < kFeatures; ++i) o[i] = f[i];
  o[kFeatures] = pe_subsidy_timer(e);
  o[kFeatures + 1] = (float)e.subsidy_level[0] / (float)e.subsidy_levels;
  o[kFeatures + 2] = (float)e.t / (float)e.episode_length;
  for (int i = 0; i < e.s; ++i) o[kFeatures + 3 + i] = i == s ? 1.0f : 0.0f;

  int* m = e.mask_regions + (size_t)s * (e.levels + 1);
  m[0] = 1;
  for (int a = 1; a <= e.levels; ++a) m[a] = cd > 0 ? 0 : 1;
}

// Phase 3, the planner: national sums (region order), reward, observation, mask.
__device__ __forceinline__ void pe_planner_day(const PandemicEnv& e) {
  float health = 0.0f, output = 0.0f, subsidy = 0.0f;
  for (int s = 0; s < e.s; ++s) {
    const float share = e.region_params[(size_t)s * PE_REGION_COLUMNS + PE_POP_SHARE];
    const float h = share * e.health_raw[s];
    const float y = share * e.output[s];
    const float b = share * e.subsidy[s];
    health = s == 0 ? h : health + h;
    output = s == 0 ? y : output + y;
    subsidy = s == 0 ? b : subsidy + b;
  }
  const float* q = e.national_params;
  const float net = (output + subsidy) - e.one_plus_r * subsidy;  // the planner pays (1 + r) per unit of subsidy
  const float econ = pe_crra(net / q[PE_N_OUTPUT_OPEN], e.one_minus_eta);
  e.national[0] = health;
  e.national[1] = econ;
  e.national[2] = subsidy;
  e.national[3] = net;
  const float h_hat = (health - q[PE_N_HEALTH_LO]) * q[PE_N_HEALTH_INV];
  const float e_hat = (econ - q[PE_N_ECON_LO]) * q[PE_N_ECON_INV];
  e.reward_planner[0] = q[PE_N_ALPHA] * h_hat + q[PE_N_ONE_MINUS_ALPHA] * e_hat;

  const int n = e.s * kFeatures;
  for (int i = 0; i < n; ++i) e.obs_planner[i] = e.features[i];
  e.obs_planner[n] = pe_subsidy_timer(e);
  e.obs_planner[n + 1] = (float)e.subsidy_level[0] / (float)e.subsidy_levels;
  e.obs_planner[n + 2] = (float)e.t / (float)e.episode_length;

  const int decides_next = e.t % e.period == 0;  // step t + 1 is a decision step
  e.mask_planner[0] = 1;
  for (int a = 1; a <= e.subsidy_levels; ++a) e.mask_planner[a] = decides_next;
}

}  // namespace

extern "C" __global__ void PandemicEconomyStep(
    int* level, int* cooldown, int* lagged_level, int* level_ring, float* change_ring, float* susceptible,
    float* infected, float* removed, float* vaccinated, float* deaths, float* cum_infected, float* unemployment,
    float* output, float* subsidy, float* health_raw, float* econ_raw, float* region_features, float* national,
    int* subsidy_level, float* observations_regions, float* observations_planner, float* rewards_regions,
    float* rewards_planner, int* action_mask_regions, int* action_mask_planner,
    const int* __restrict__ sampled_actions_regions, const int* __restrict__ sampled_actions_planner,
    const float* __restrict__ beta_table, const float* __restrict__ filter_table,
    const float* __restrict__ filter_weights, const float* __restrict__ region_params,
    const float* __restrict__ national_params, int num_regions, int num_levels, int cooldown_steps,
    int num_subsidy_levels, int subsidy_period, int delay, int filter_memory, int num_filters, float gamma,
    int vaccination_start, float vaccination_rate, float output_per_worker_day, float subsidy_top_day, float one_plus_r,
    float one_minus_eta, int* done, int* timestep, int num_agents, int episode_length) {
  const int env = wd_env_id();
  const int S = num_regions;
  PandemicEnv e;
  e.s = S;
  e.levels = num_levels;
  e.cooldown_steps = cooldown_steps;
  e.subsidy_levels = num_subsidy_levels;
  e.period = subsidy_period;
  e.delay = delay;
  e.memory = filter_memory;
  e.filters = num_filters;
  e.t = timestep[env] + 1;
  e.episode_length = episode_length;
  const size_t rs = (size_t)env * S;
  e.level = level + rs;
  e.cooldown = cooldown + rs;
  e.lagged_level = lagged_level + rs;
  e.level_ring = level_ring + rs * delay;
  e.change_ring = change_ring + rs * 2 * filter_memory;
  e.susceptible = susceptible + rs;
  e.infected = infected + rs;
  e.removed = removed + rs;
  e.vaccinated = vaccinated + rs;
  e.deaths = deaths + rs;
  e.cum_infected = cum_infected + rs;
  e.unemployment = unemployment + rs;
  e.output = output + rs;
  e.subsidy = subsidy + rs;
  e.health_raw = health_raw + rs;
  e.econ_raw = econ_raw + rs;
  e.features = region_features + rs * kFeatures;
  e.national = national + (size_t)env * 4;
  e.subsidy_level = subsidy_level + env;
  e.obs_regions = observations_regions + rs * (kFeatures + 3 + S);
  e.obs_planner = observations_planner + (size_t)env * (S * kFeatures + 3);
  e.rewards_regions = rewards_regions + rs;
  e.reward_planner = rewards_planner + env;
  e.mask_regions = action_mask_regions + rs * (num_levels + 1);
  e.mask_planner = action_mask_planner + (size_t)env * (num_subsidy_levels + 1);
  e.actions_regions = sampled_actions_regions + rs;
  e.action_planner = sampled_actions_planner + env;
  e.beta_table = beta_table;
  e.filter_table = filter_table;
  e.filter_weights = filter_weights;
  e.region_params = region_params;
  e.national_params = national_params;
  e.gamma = gamma;
  e.vaccination_start = vaccination_start;
  e.vaccination_rate = vaccination_rate;
  e.output_per_worker_day = output_per_worker_day;
  e.subsidy_top_day = subsidy_top_day;
  e.one_plus_r = one_plus_r;
  e.one_minus_eta = one_minus_eta;

  WD_FOR_EACH_AGENT(i, S + 1) {
    if (i < S) {
      pe_region_decide(e, i);
    } else {
      pe_planner_decide(e);
    }
  }
  wd_sync_env();
  if (wd_env_leader()) timestep[env] = e.t;  // every thread read it above

  WD_FOR_EACH_AGENT(s, S) pe_region_day(e, s);
  wd_sync_env();

  WD_FOR_EACH_AGENT(p, 1) pe_planner_day(e);
  if (wd_env_leader() && e.t >= episode_length) done[env] = 2;  // truncated: the env never terminates
}
