"""The controller runtime: informers, a work queue, level-triggered controllers, leader election,
Events, status writes and the manager that runs them. It knows nothing about rollouts.
"""
