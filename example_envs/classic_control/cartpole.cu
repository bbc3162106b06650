// CartPole (Gymnasium CartPole-v1): one thread per environment replica.
//
// Launched flat (grid ceil(n_envs / 256), block 256); thread
// wd_global_thread_id() steps env `env < n_envs`. No barriers: every env is
// one thread's. Dynamics are Gymnasium's explicit Euler step, in float32 with
// the same operation order as its Python; sin/cos come from wd_sincosf so the
// GPU and the cpu executor agree bit for bit. Reward 1 every step (Sutton &
// Barto's 0 / -1 on termination if sutton_barto_reward), terminated when the
// cart or the pole leaves its bounds. The framework owns the clock
// (framework_clock): it advances _timestep_ and truncates at episode_length.
#include <warp_drive/core.h>

extern "C" __global__ void CartPoleStep(float* __restrict__ state,          // (E, 1, 4) x, x_dot, theta, theta_dot
                                        const int* __restrict__ actions,    // (E, 1) 0 = push left, 1 = push right
                                        float* __restrict__ observations,   // (E, 1, 4) = state
                                        float* __restrict__ rewards,        // (E, 1)
                                        int* __restrict__ done,             // (E,) 1 terminated
                                        int n_envs, float gravity, float masscart,
                                        float masspole, float length, float force_mag, float tau,
                                        float theta_threshold_radians, float x_threshold,
                                        int sutton_barto_reward) {
  const int env = wd_global_thread_id();
  if (env >= n_envs) return;

  float* s = state + 4 * env;
  float x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
  const float total_mass = masspole + masscart;
  const float polemass_length = masspole * length;

  const float force = actions[env] == 1 ? force_mag : -force_mag;
  float sintheta, costheta;
  wd_sincosf(theta, &sintheta, &costheta);
  const float temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
  const float thetaacc = (gravity * sintheta - costheta * temp) /
                         (length * (4.0f / 3.0f - masspole * (costheta * costheta) / total_mass));
  const float xacc = temp - polemass_length * thetaacc * costheta / total_mass;

  x = x + tau * x_dot;
  x_dot = x_dot + tau * xacc;
  theta = theta + tau * theta_dot;
  theta_dot = theta_dot + tau * thetaacc;

  s[0] = x;
  s[1] = x_dot;
  s[2] = theta;
  s[3] = theta_dot;
  float* o = observations + 4 * env;
  o[0] = x;
  o[1] = x_dot;
  o[2] = theta;
  o[3] = theta_dot;

  const bool terminated = x < -x_threshold || x > x_threshold || theta < -theta_threshold_radians ||
                          theta > theta_threshold_radians;
  if (sutton_barto_reward) {
    rewards[env] = terminated ? -1.0f : 0.0f;
  } else {
    rewards[env] = 1.0f;
  }
  done[env] = terminated ? 1 : 0;  // the framework truncates after the step where this is 0
}
