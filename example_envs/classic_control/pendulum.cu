// Pendulum (Gymnasium Pendulum-v1): one thread per environment replica.
//
// Launched flat (grid ceil(n_envs / 256), block 256); thread
// wd_global_thread_id() steps env `env < n_envs`; no barriers. Gymnasium's
// step in float32 and its operation order: torque u clipped to +-max_torque,
// cost = normalize(theta)^2 + 0.1 thetadot^2 + 0.001 u^2 of the state before
// the step (reward = -cost), semi-implicit Euler with the speed clipped to
// +-max_speed. Never terminates; the framework truncates at episode_length
// (framework_clock). sin/cos through wd_sincosf and the angle normalisation
// through fmodf (exact on both sides), so the GPU and the cpu executor agree
// bit for bit.
#include <warp_drive/core.h>

// Gymnasium's angle_normalize: ((x + pi) % (2 pi)) - pi with Python's floored
// modulo (the result takes the sign of the divisor), in float32.
__device__ __forceinline__ float pendulum_angle_normalize(float x) {
  const float kPi = 3.14159265358979323846f;
  const float kTwoPi = 6.28318530717958647692f;
  float r = fmodf(x + kPi, kTwoPi);
  if (r < 0.0f) r += kTwoPi;
  return r - kPi;
}

extern "C" __global__ void PendulumStep(float* __restrict__ state,          // (E, 1, 2) theta, thetadot
                                        const float* __restrict__ actions,  // (E, 1, 1) torque (clipped here)
                                        float* __restrict__ observations,   // (E, 1, 3) cos, sin, thetadot
                                        float* __restrict__ rewards,        // (E, 1)
                                        int n_envs, float max_speed, float max_torque,
                                        float dt, float g, float m, float l) {
  const int env = wd_global_thread_id();
  if (env >= n_envs) return;

  float* s = state + 2 * env;
  const float th = s[0], thdot = s[1];
  const float u = fminf(fmaxf(actions[env], -max_torque), max_torque);
  const float th_norm = pendulum_angle_normalize(th);
  const float costs = th_norm * th_norm + 0.1f * (thdot * thdot) + 0.001f * (u * u);

  float sin_th, cos_th;
  wd_sincosf(th, &sin_th, &cos_th);
  float newthdot = thdot + (3.0f * g / (2.0f * l) * sin_th + 3.0f / (m * (l * l)) * u) * dt;
  newthdot = fminf(fmaxf(newthdot, -max_speed), max_speed);
  const float newth = th + newthdot * dt;

  s[0] = newth;
  s[1] = newthdot;
  float sin_new, cos_new;
  wd_sincosf(newth, &sin_new, &cos_new);
  float* o = observations + 3 * env;
  o[0] = cos_new;
  o[1] = sin_new;
  o[2] = newthdot;
  rewards[env] = -costs;
}
