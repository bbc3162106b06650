// ContinuousMountainCar (Gymnasium MountainCarContinuous-v0): one thread per
// environment replica.
//
// Launched flat (grid ceil(n_envs / 256), block 256); thread
// wd_global_thread_id() steps env `env < n_envs`; no barriers. Gymnasium's
// step in float32 and its operation order: the force is the action clipped to
// [min_action, max_action], times power, against gravity along cos(3 x); clip
// the speed, move, clip the position (a car stopped at the left wall loses its
// leftward speed); terminated at the goal; reward 100 on reaching it minus 0.1
// a^2 -- with the action as given, unclipped, exactly as Gymnasium computes
// it; truncated at episode_length by the framework (framework_clock). cos
// through wd_sincosf.
#include <warp_drive/core.h>

extern "C" __global__ void ContinuousMountainCarStep(
    float* __restrict__ state,          // (E, 1, 2) position, velocity
    const float* __restrict__ actions,  // (E, 1, 1) force in [min_action, max_action] (clipped here)
    float* __restrict__ observations,   // (E, 1, 2) = state
    float* __restrict__ rewards,        // (E, 1)
    int* __restrict__ done,             // (E,) 1 terminated
    int n_envs, float min_action, float max_action, float min_position,
    float max_position, float max_speed, float goal_position, float goal_velocity, float power,
    float gravity) {
  const int env = wd_global_thread_id();
  if (env >= n_envs) return;

  float* s = state + 2 * env;
  float position = s[0], velocity = s[1];
  const float action = actions[env];
  const float force = fminf(fmaxf(action, min_action), max_action);
  float sin3x, cos3x;
  wd_sincosf(3.0f * position, &sin3x, &cos3x);
  velocity = velocity + (force * power - gravity * cos3x);
  velocity = fminf(fmaxf(velocity, -max_speed), max_speed);
  position = position + velocity;
  position = fminf(fmaxf(position, min_position), max_position);
  if (position == min_position && velocity < 0.0f) velocity = 0.0f;

  s[0] = position;
  s[1] = velocity;
  observations[2 * env] = position;
  observations[2 * env + 1] = velocity;
  const bool terminated = position >= goal_position && velocity >= goal_velocity;
  rewards[env] = (terminated ? 100.0f : 0.0f) - (action * action) * 0.1f;
  done[env] = terminated ? 1 : 0;  // the framework truncates after the step where this is 0
}
