// MountainCar (Gymnasium MountainCar-v0): one thread per environment replica.
//
// Launched flat (grid ceil(n_envs / 256), block 256); thread
// wd_global_thread_id() steps env `env < n_envs`; no barriers. Gymnasium's
// step in float32 and its operation order: push (action - 1) * force against
// gravity along cos(3 x), clip the speed, move, clip the position (a car
// stopped at the left wall loses its leftward speed); reward -1; terminated at
// the goal (position >= goal_position and velocity >= goal_velocity);
// truncated at episode_length by the framework (framework_clock). cos through
// wd_sincosf (bit-identical on the GPU and the cpu executor).
#include <warp_drive/core.h>

extern "C" __global__ void MountainCarStep(float* __restrict__ state,         // (E, 1, 2) position, velocity
                                           const int* __restrict__ actions,   // (E, 1) 0 left, 1 none, 2 right
                                           float* __restrict__ observations,  // (E, 1, 2) = state
                                           float* __restrict__ rewards,       // (E, 1)
                                           int* __restrict__ done,            // (E,) 1 terminated
                                           int n_envs, float min_position,
                                           float max_position, float max_speed, float goal_position,
                                           float goal_velocity, float force, float gravity) {
  const int env = wd_global_thread_id();
  if (env >= n_envs) return;

  float* s = state + 2 * env;
  float position = s[0], velocity = s[1];
  float sin3x, cos3x;
  wd_sincosf(3.0f * position, &sin3x, &cos3x);
  velocity = velocity + ((float)(actions[env] - 1) * force + cos3x * (-gravity));
  velocity = fminf(fmaxf(velocity, -max_speed), max_speed);
  position = position + velocity;
  position = fminf(fmaxf(position, min_position), max_position);
  if (position == min_position && velocity < 0.0f) velocity = 0.0f;

  s[0] = position;
  s[1] = velocity;
  observations[2 * env] = position;
  observations[2 * env + 1] = velocity;
  const bool terminated = position >= goal_position && velocity >= goal_velocity;
  rewards[env] = -1.0f;
  done[env] = terminated ? 1 : 0;  // the framework truncates after the step where this is 0
}
