"""Neutral machinery every controller uses: the reconcile context (wiring only), the ports one
controller wakes another through and their typed keys, the engine record kept in a status, the writes
a controller remembers as its own, the one requeue rule, memos and the namespaces a controller reads.

Its floor: the lowest of controllers; it imports nothing else of controllers (pyproject's
controllers-floor contract)."""
