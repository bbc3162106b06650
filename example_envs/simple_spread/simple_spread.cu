// SimpleSpread step: MPE's cooperative navigation as JaxMARL's MPE_simple_spread_v3.
//
// One block per environment replica; the step is written as phases over the
// env's agents (WD_FOR_EACH_AGENT, <warp_drive/agents.h>) separated by
// env-wide barriers, so it is correct for any number of threads per env (one
// per agent on a GPU, one for the whole env on the cpu executor):
//
//   1. force      each agent sums the soft contact forces of every other agent
//                 (all positions as they were before the step) and adds its
//                 action force; written to agent_force;
//   2. integrate  each agent moves (JaxMARL's order, or MPE's with
//                 semi_implicit) and writes its slice of the global state;
//   3. landmarks  each landmark (threads stride over landmarks here) finds its
//                 nearest agent at the new positions -> landmark_dist;
//   4. reward     each agent counts its collisions, adds the shared distance
//                 term and writes its observation.
//
// Only agent i writes agent i's rows (landmark l's rows in phase 3); a phase
// reads other agents' rows only as the barrier before it left them.
//
// Float math: single precision, every operation rounded on its own (the cpu
// build has -ffp-contract=off, nvcc --fmad=false), exp and log through the
// portable wd_expf / wd_logf, so the GPU, the cpu executor and the NumPy
// reference compute the same bits. The expressions keep JaxMARL's operation
// order (e.g. ((c * dx) / d) * penetration), so they agree with it to float
// rounding.
#include <warp_drive/core.h>

namespace {

// log(1 + y) for y >= 0 (here y = exp(-|x|) <= 1): Goldberg's y * log(u) / (u - 1)
// with u = 1 + y, accurate where log(1 + y) alone would lose y's low bits.
__device__ __forceinline__ float spread_log1pf(float y) {
  const float u = 1.0f + y;
  if (u == 1.0f) return y;
  return wd_logf(u) * (y / (u - 1.0f));
}

struct SpreadEnv {
  int n, num_landmarks;
  float* pos;        // (n, 2)
  float* vel;        // (n, 2)
  const float* landmarks;  // (num_landmarks, 2)
  float* force;      // (n, 2)
  float* landmark_dist;  // (num_landmarks,)
  float* state;      // (4 n + 2 num_landmarks,)
  float* obs;        // (n, obs_size)
  float* rewards;    // (n,)
  const int* discrete;      // (n,) or null
  const float* continuous;  // (n, 5) or null
  int obs_size;
  float dt, velocity_retention, mass, accel, max_speed;
  float contact_force, contact_margin, inverse_margin, agent_radius, local_ratio, global_ratio;
  int semi_implicit;
};

// Phase 1: the total force on agent i.
__device__ __forceinline__ void spread_force(const SpreadEnv& e, int i) {
  const float px = e.pos[2 * i], py = e.pos[2 * i + 1];
  const float r_sum = e.agent_radius + e.agent_radius;
  const float k = e.contact_margin;
  // JaxMARL adds, for agent i, the forces of the smaller ids (one by one) to
  // the sum of the larger ids' forces; the same grouping here.
  float lo_x = 0.0f, lo_y = 0.0f, hi_x = 0.0f, hi_y = 0.0f;
  for (int j = 0; j < e.n; ++j) {
    if (j == i) continue;
    const float dx = px - e.pos[2 * j];
    const float dy = py - e.pos[2 * j + 1];
    const float d = wd_sqrtf(dx * dx + dy * dy);
    float fx = 0.0f, fy = 0.0f;
    if (d > 0.0f) {  // coincident agents: no direction, no force (JaxMARL: 0 / 0 = NaN)
      // penetration = k * logaddexp(0, x) = k * (max(x, 0) + log1p(exp(-|x|)))
      // x = -(d - r_sum) / k, evaluated as XLA evaluates JaxMARL's expression: times
      // the float reciprocal of k; and c * dx / d * penetration as c * (dx / d) * penetration.
      const float x = -(d - r_sum) * e.inverse_margin;
      const float penetration = (fmaxf(x, 0.0f) + spread_log1pf(wd_expf(-fabsf(x)))) * k;
      fx = (e.contact_force * (dx / d)) * penetration;
      fy = (e.contact_force * (dy / d)) * penetration;
    }
    if (j < i) {
      lo_x = lo_x + fx;
      lo_y = lo_y + fy;
    } else {
      hi_x = hi_x + fx;
      hi_y = hi_y + fy;
    }
  }
  float ux, uy;
  if (e.discrete) {
    // 0 no-op, 1 -x, 2 +x, 3 -y, 4 +y
    const int a = e.discrete[i];
    ux = a == 1 ? -1.0f : (a == 2 ? 1.0f : 0.0f);
    uy = a == 3 ? -1.0f : (a == 4 ? 1.0f : 0.0f);
  } else {
    const float* a = e.continuous + 5 * i;
    ux = a[2] - a[1];
    uy = a[4] - a[3];
  }
  e.force[2 * i] = (lo_x + hi_x) + ux * e.accel;
  e.force[2 * i + 1] = (lo_y + hi_y) + uy * e.accel;
}

// Phase 2: integrate agent i (JaxMARL: position with the old velocity, then
// damping, force and speed cap; semi_implicit: the position with the new one).
__device__ __forceinline__ void spread_integrate(const SpreadEnv& e, int i) {
  const float vx0 = e.vel[2 * i], vy0 = e.vel[2 * i + 1];
  float vx = vx0 * e.velocity_retention + (e.force[2 * i] / e.mass) * e.dt;
  float vy = vy0 * e.velocity_retention + (e.force[2 * i + 1] / e.mass) * e.dt;
  if (e.max_speed >= 0.0f) {
    const float speed = wd_sqrtf(vx * vx + vy * vy);
    if (speed > e.max_speed) {
      vx = (vx / speed) * e.max_speed;
      vy = (vy / speed) * e.max_speed;
    }
  }
  const float step_vx = e.semi_implicit ? vx : vx0;
  const float step_vy = e.semi_implicit ? vy : vy0;
  const float px = e.pos[2 * i] + step_vx * e.dt;
  const float py = e.pos[2 * i + 1] + step_vy * e.dt;
  e.pos[2 * i] = px;
  e.pos[2 * i + 1] = py;
  e.vel[2 * i] = vx;
  e.vel[2 * i + 1] = vy;
  float* s = e.state + 4 * i;
  s[0] = px;
  s[1] = py;
  s[2] = vx;
  s[3] = vy;
}

// Phase 3: landmark l's distance to its nearest agent (new positions).
__device__ __forceinline__ void spread_landmark(const SpreadEnv& e, int l) {
  const float lx = e.landmarks[2 * l], ly = e.landmarks[2 * l + 1];
  float nearest = INFINITY;
  for (int j = 0; j < e.n; ++j) {
    const float dx = e.pos[2 * j] - lx;
    const float dy = e.pos[2 * j + 1] - ly;
    nearest = fminf(nearest, wd_sqrtf(dx * dx + dy * dy));
  }
  e.landmark_dist[l] = nearest;
  float* s = e.state + 4 * e.n + 2 * l;
  s[0] = lx;
  s[1] = ly;
}

// Phase 4: agent i's reward and observation.
__device__ __forceinline__ void spread_reward_and_observe(const SpreadEnv& e, int i) {
  const float px = e.pos[2 * i], py = e.pos[2 * i + 1];
  const float r_sum = e.agent_radius + e.agent_radius;
  float global = 0.0f;
  for (int l = 0; l < e.num_landmarks; ++l) global = global + (-e.landmark_dist[l]);
  int collisions = 0;
  for (int j = 0; j < e.n; ++j) {
    if (j == i) continue;
    const float dx = px - e.pos[2 * j];
    const float dy = py - e.pos[2 * j + 1];
    if (wd_sqrtf(dx * dx + dy * dy) < r_sum) ++collisions;
  }
  e.rewards[i] = (float)(-collisions) * e.local_ratio + global * e.global_ratio;

  float* o = e.obs + (size_t)i * e.obs_size;
  o[0] = e.vel[2 * i];
  o[1] = e.vel[2 * i + 1];
  o[2] = px;
  o[3] = py;
  int w = 4;
  for (int l = 0; l < e.num_landmarks; ++l) {
    o[w++] = e.landmarks[2 * l] - px;
    o[w++] = e.landmarks[2 * l + 1] - py;
  }
  for (int j = 0; j < e.n; ++j) {
    if (j == i) continue;
    o[w++] = e.pos[2 * j] - px;
    o[w++] = e.pos[2 * j + 1] - py;
  }
  while (w < e.obs_size) o[w++] = 0.0f;  // the silent agents' communication channels
}

__device__ __forceinline__ void spread_step(SpreadEnv& e, int* timestep, int* done, int episode_length) {
  const int env = wd_env_id();
  const int t = timestep[env] + 1;

  WD_FOR_EACH_AGENT(i, e.n) spread_force(e, i);
  wd_sync_env();
  if (wd_env_leader()) timestep[env] = t;  // every thread read it above

  WD_FOR_EACH_AGENT(i, e.n) spread_integrate(e, i);
  wd_sync_env();

  WD_FOR_EACH_AGENT(l, e.num_landmarks) spread_landmark(e, l);
  wd_sync_env();

  WD_FOR_EACH_AGENT(i, e.n) spread_reward_and_observe(e, i);
  if (wd_env_leader() && t >= episode_length) done[env] = 2;  // truncated: the env never terminates
}

__device__ __forceinline__ SpreadEnv spread_env(
    float* agent_pos, float* agent_vel, const float* landmark_pos, float* agent_force, float* landmark_dist,
    float* state, float* observations, float* rewards, int num_landmarks, float dt, float velocity_retention,
    float mass, float accel, float max_speed, float contact_force, float contact_margin, float agent_radius,
    float local_ratio, float global_ratio, int semi_implicit, int num_agents) {
  const int env = wd_env_id();
  const int n = num_agents, nl = num_landmarks;
  SpreadEnv e;
  e.n = n;
  e.num_landmarks = nl;
  e.obs_size = 4 + 2 * nl + 4 * (n - 1);
  e.pos = agent_pos + (size_t)env * n * 2;
  e.vel = agent_vel + (size_t)env * n * 2;
  e.landmarks = landmark_pos + (size_t)env * nl * 2;
  e.force = agent_force + (size_t)env * n * 2;
  e.landmark_dist = landmark_dist + (size_t)env * nl;
  e.state = state + (size_t)env * (4 * n + 2 * nl);
  e.obs = observations + (size_t)env * n * e.obs_size;
  e.rewards = rewards + (size_t)env * n;
  e.discrete = nullptr;
  e.continuous = nullptr;
  e.dt = dt;
  e.velocity_retention = velocity_retention;
  e.mass = mass;
  e.accel = accel;
  e.max_speed = max_speed;
  e.contact_force = contact_force;
  e.contact_margin = contact_margin;
  e.inverse_margin = 1.0f / contact_margin;
  e.agent_radius = agent_radius;
  e.local_ratio = local_ratio;
  e.global_ratio = global_ratio;
  e.semi_implicit = semi_implicit;
  return e;
}

}  // namespace

// Discrete actions: sampled_actions (E, N) int32 in 0..4.
extern "C" __global__ void SimpleSpreadStep(
    float* agent_pos, float* agent_vel, const float* __restrict__ landmark_pos, float* agent_force,
    float* landmark_dist, float* state, float* observations, const int* __restrict__ sampled_actions, float* rewards,
    int num_landmarks, float dt, float velocity_retention, float mass, float accel, float max_speed,
    float contact_force, float contact_margin, float agent_radius, float local_ratio, float global_ratio,
    int semi_implicit, int* done, int* timestep, int num_agents, int episode_length) {
  SpreadEnv e = spread_env(agent_pos, agent_vel, landmark_pos, agent_force, landmark_dist, state, observations,
                           rewards, num_landmarks, dt, velocity_retention, mass, accel, max_speed, contact_force,
                           contact_margin, agent_radius, local_ratio, global_ratio, semi_implicit, num_agents);
  e.discrete = sampled_actions + (size_t)wd_env_id() * num_agents;
  spread_step(e, timestep, done, episode_length);
}

// Continuous actions: sampled_actions (E, N, 5) float32 in [0, 1], JaxMARL's layout.
extern "C" __global__ void SimpleSpreadContinuousStep(
    float* agent_pos, float* agent_vel, const float* __restrict__ landmark_pos, float* agent_force,
    float* landmark_dist, float* state, float* observations, const float* __restrict__ sampled_actions,
    float* rewards, int num_landmarks, float dt, float velocity_retention, float mass, float accel, float max_speed,
    float contact_force, float contact_margin, float agent_radius, float local_ratio, float global_ratio,
    int semi_implicit, int* done, int* timestep, int num_agents, int episode_length) {
  SpreadEnv e = spread_env(agent_pos, agent_vel, landmark_pos, agent_force, landmark_dist, state, observations,
                           rewards, num_landmarks, dt, velocity_retention, mass, accel, max_speed, contact_force,
                           contact_margin, agent_radius, local_ratio, global_ratio, semi_implicit, num_agents);
  e.continuous = sampled_actions + (size_t)wd_env_id() * num_agents * 5;
  spread_step(e, timestep, done, episode_length);
}
