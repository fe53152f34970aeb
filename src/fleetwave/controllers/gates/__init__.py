"""Facts for the engine's gates that need I/O: webhook calls and analysis measurements, taken for
the current stage of any rollout kind and handed to the pure engine as verdicts.

Its floor: above controllers.fleet and shared, below the families (pyproject's controllers-floor
contract)."""
