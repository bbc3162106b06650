"""How an env's step kernel maps threads onto agents: an env class's
``thread_layout``, read by the launches (``function_manager``) and declared by
the env (``environment``). A leaf of the runtime layer, so that the env
contract can name these without importing the executors (and torch)."""

THREADS_PER_AGENT = "agents"  # grid (num_envs, blocks_per_env), one thread per agent
THREADS_PER_ENV = "envs"  # flat grid, one thread per environment replica (single-agent envs)
# One block per env; the step handles its agents with WD_FOR_EACH_AGENT
# (warp_drive/agents.h), so the executor chooses how many threads run them:
# one per agent up to the kernel's limit on a GPU, one per env on the cpu executor.
AGENT_PHASES = "phases"
THREAD_LAYOUTS = (THREADS_PER_AGENT, THREADS_PER_ENV, AGENT_PHASES)
