"""Recording a turn: the Recorder that binds file snapshots to turns, the thread sidecars, the pre-edit states of
the agent's patches, the session lock and the automatic gc."""
