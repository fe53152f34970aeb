"""The member clusters as controllers see them: MemberCluster objects turned into engine clusters
and delivery targets, the MemberCluster controller, watches on members that wake a waiting
judgement, the ports (helm, health) to members, and the boundary around members' credentials
(what content may read and what Local content may write).

Its floor: above controllers.shared, below gates and the families (pyproject's controllers-floor
contract)."""
