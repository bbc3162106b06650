// Acrobot (Gymnasium Acrobot-v1, "book" dynamics): one thread per environment replica.
//
// Launched flat (grid ceil(n_envs / 256), block 256); thread
// wd_global_thread_id() steps env `env < n_envs`; no barriers. One step is
// Gymnasium's: a fixed torque in {-1, 0, +1}, one RK4 step of dt = 0.2 s of
// the two-link equations of motion, angles wrapped into [-pi, pi], velocities
// bounded by 4 pi and 9 pi; reward -1, 0 on the terminating step; terminated
// when the tip rises above the bar (-cos t1 - cos(t1 + t2) > 1); truncated at
// episode_length by the framework (framework_clock). float32 throughout, in
// the operation order of Gymnasium's Python, with constants equal to its
// float64 ones rounded to float32; trigonometry through wd_sincosf, so GPU and
// cpu executor agree bit for bit.
#include <warp_drive/core.h>

// d(state)/dt for state (theta1, theta2, dtheta1, dtheta2) and torque a.
// Gymnasium writes cos(theta - pi/2), which is sin(theta): in float32 the sine
// is the more accurate of the two (no rounding of theta - pi/2).
__device__ __forceinline__ void acrobot_dsdt(const float* s, float a, float* ds) {
  const float theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  float sin2, cos2, sin1, cos1, sin12, cos12;
  wd_sincosf(theta2, &sin2, &cos2);
  wd_sincosf(theta1, &sin1, &cos1);
  wd_sincosf(theta1 + theta2, &sin12, &cos12);
  // m1 = m2 = 1, l1 = 1, lc1 = lc2 = 0.5, I1 = I2 = 1, g = 9.8
  const float d1 = ((0.25f + (1.25f + 1.0f * cos2)) + 1.0f) + 1.0f;  // m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 cos) + I1 + I2
  const float d2 = (0.25f + 0.5f * cos2) + 1.0f;                     // m2 (lc2^2 + l1 lc2 cos) + I2
  const float phi2 = 4.9f * sin12;                                    // m2 lc2 g cos(t1 + t2 - pi/2)
  const float phi1 = ((-0.5f * (dtheta2 * dtheta2)) * sin2 - ((1.0f * dtheta2) * dtheta1) * sin2) +
                     14.7f * sin1 + phi2;                             // ... + (m1 lc1 + m2 l1) g cos(t1 - pi/2)
  const float ddtheta2 = (a + d2 / d1 * phi1 - (0.5f * (dtheta1 * dtheta1)) * sin2 - phi2) /
                         (1.25f - (d2 * d2) / d1);  // (m2 lc2^2 + I2 - d2^2 / d1)
  const float ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  ds[0] = dtheta1;
  ds[1] = dtheta2;
  ds[2] = ddtheta1;
  ds[3] = ddtheta2;
}

// Gymnasium's wrap(x, -pi, pi): shift by whole turns until inside. The loops
// stop if a shift no longer changes x (inf, or a finite x too large for one
// turn to register), where Gymnasium would loop forever.
__device__ __forceinline__ float acrobot_wrap(float x) {
  const float kPi = 3.14159265358979323846f;
  const float kTurn = kPi - (-kPi);
  while (x > kPi) {
    const float y = x - kTurn;
    if (y == x) break;
    x = y;
  }
  while (x < -kPi) {
    const float y = x + kTurn;
    if (y == x) break;
    x = y;
  }
  return x;
}

extern "C" __global__ void AcrobotStep(float* __restrict__ state,         // (E, 1, 4) theta1, theta2, dtheta1, dtheta2
                                       const int* __restrict__ actions,   // (E, 1) torque index 0, 1, 2 -> -1, 0, +1
                                       float* __restrict__ observations,  // (E, 1, 6) cos t1, sin t1, cos t2, sin t2, dt1, dt2
                                       float* __restrict__ rewards,       // (E, 1)
                                       int* __restrict__ done,            // (E,) 1 terminated
                                       int n_envs) {
  const int env = wd_global_thread_id();
  if (env >= n_envs) return;

  float* s = state + 4 * env;
  const float torque = (float)(actions[env] - 1);
  const float dt = 0.2f;
  const float dt2 = dt / 2.0f;
  const float dt6 = dt / 6.0f;

  // One classic RK4 step (Gymnasium's rk4 over t = [0, dt]).
  float y0[4], y[4], k1[4], k2[4], k3[4], k4[4];
  for (int i = 0; i < 4; ++i) y0[i] = s[i];
  acrobot_dsdt(y0, torque, k1);
  for (int i = 0; i < 4; ++i) y[i] = y0[i] + dt2 * k1[i];
  acrobot_dsdt(y, torque, k2);
  for (int i = 0; i < 4; ++i) y[i] = y0[i] + dt2 * k2[i];
  acrobot_dsdt(y, torque, k3);
  for (int i = 0; i < 4; ++i) y[i] = y0[i] + dt * k3[i];
  acrobot_dsdt(y, torque, k4);
  float ns[4];
  for (int i = 0; i < 4; ++i) ns[i] = y0[i] + dt6 * (k1[i] + 2.0f * k2[i] + 2.0f * k3[i] + k4[i]);

  ns[0] = acrobot_wrap(ns[0]);
  ns[1] = acrobot_wrap(ns[1]);
  const float kMaxVel1 = 12.566370614359172f;  // 4 pi
  const float kMaxVel2 = 28.274333882308138f;  // 9 pi
  ns[2] = fminf(fmaxf(ns[2], -kMaxVel1), kMaxVel1);
  ns[3] = fminf(fmaxf(ns[3], -kMaxVel2), kMaxVel2);
  for (int i = 0; i < 4; ++i) s[i] = ns[i];

  float sin1, cos1, sin2, cos2, sin12, cos12;
  wd_sincosf(ns[0], &sin1, &cos1);
  wd_sincosf(ns[1], &sin2, &cos2);
  wd_sincosf(ns[1] + ns[0], &sin12, &cos12);
  float* o = observations + 6 * env;
  o[0] = cos1;
  o[1] = sin1;
  o[2] = cos2;
  o[3] = sin2;
  o[4] = ns[2];
  o[5] = ns[3];

  const bool terminated = -cos1 - cos12 > 1.0f;
  rewards[env] = terminated ? 0.0f : -1.0f;
  done[env] = terminated ? 1 : 0;  // the framework truncates after the step where this is 0
}
