# twinlake's own Cap'n Proto schema for the fr3_stack wire protocol.
#
# Written from fr3_stack's published message layouts (its Cap'n Proto schema; docs/daemon.md): every struct
# below has the same field ordinals, types and defaults as fr3_stack's proto/fr3.capnp, so
# messages are layout-compatible in both directions. Cap'n Proto matches structs by layout on
# the wire, never by file or type id, so this file keeps its own id. Field names are ours to
# choose but follow fr3_stack's for readability. Messages are unpacked, one ZMQ frame each.
@0xd3a1f0c2b4e59687;

# ---- motion commands (PULL, default port 5555) -------------------------------------------

struct IdleCmd {
  dRate @0 :List(Float64);        # 7, per-joint damping rate [1/s]
  useFriction @1 :Bool;
}

struct CartesianImpedanceCmd {
  targetPos @0 :List(Float64);        # 3 [m], base frame
  targetQuatXyzw @1 :List(Float64);   # 4, xyzw
  k @2 :List(Float64);                # 6: tx ty tz rx ry rz
  d @3 :List(Float64);                # 6
  qNull @4 :List(Float64);            # 7 [rad]
  kNull @5 :Float64;
  filterAlpha @6 :Float64;
  unusedOperationalSpace @7 :Bool;    # placeholder kept for layout
  targetWrench @8 :List(Float64);     # 6
  maxDelta @9 :List(Float64);         # 6, 0 = no clip
  useFriction @10 :Bool;
  linearInterp @11 :Bool = true;
  ema @12 :Bool = true;
  dNull @13 :Float64;                 # 0 = 2*sqrt(kNull)
  maxTauNull @14 :Float64;            # 0 = no clip
}

struct JointImpedanceCmd {
  qTarget @0 :List(Float64);      # 7 [rad], j1..j7, before the daemon's EMA
  kJoint @1 :List(Float64);       # 7 [N m/rad]
  dJoint @2 :List(Float64);       # 7 [N m s/rad]
  filterAlpha @3 :Float64;        # EMA weight on the new target, per 1 ms tick
  useFriction @4 :Bool;
}

# Controllers this daemon does not run. Declared without fields (a reader may declare fewer
# trailing fields than the sender); the daemon answers them with a lastError.
struct AdmittanceCmd {}
struct HybridCmd {}

struct MoveToCmd {
  targetPos @0 :List(Float64);        # 3
  targetQuatXyzw @1 :List(Float64);   # 4
  runTime @2 :Float64;                # [s]
  k @3 :List(Float64);                # 6
  d @4 :List(Float64);                # 6
  qNull @5 :List(Float64);            # 7
  kNull @6 :Float64;
  dNull @7 :Float64;
  maxTauNull @8 :Float64;
}

struct Command {
  termination @0 :Bool;
  config :union {
    idle @1 :IdleCmd;
    cartesianImpedance @2 :CartesianImpedanceCmd;
    jointImpedance @3 :JointImpedanceCmd;
    admittance @4 :AdmittanceCmd;
    hybrid @5 :HybridCmd;
    moveTo @6 :MoveToCmd;
  }
}

# ---- state (PUB, default port 5556, ~200 Hz, no topic frame) -------------------------------

struct State {
  controller @0 :Text;                # "joint_impedance", "gravity_compensation", ...
  pos @1 :List(Float64);              # 3 [m], O_T_EE translation, base frame
  quatXyzw @2 :List(Float64);         # 4, xyzw
  q @3 :List(Float64);                # 7 [rad]
  dq @4 :List(Float64);               # 7 [rad/s]
  wrenchExt @5 :List(Float64);        # 6
  timestamp @6 :Float64;              # robot clock [s] of the cached state
  running @7 :Bool;
  lastError @8 :Text;
  wrenchFt @9 :List(Float64);         # 6 or empty
  wrenchFtRaw @10 :List(Float64);     # 6 or empty
  ftCompensated @11 :Bool;
}

# ---- recording service (REP, default port 5557) ------------------------------------------

enum RecordingAction {
  status @0;
  start @1;
  stop @2;
}

struct RecordingRequest {
  action @0 :RecordingAction;
  recordingId @1 :Text;
  path @2 :Text;
}

struct RecordingStatus {
  recordingId @0 :Text;
  path @1 :Text;
  active @2 :Bool;
  ok @3 :Bool;
  finished @4 :Bool;
  complete @5 :Bool;
  written @6 :UInt64;
  discarded @7 :UInt64;
  dropped @8 :UInt64;
  error @9 :Text;
  errorCode @10 :Int32;
}

struct RecordingReply {
  accepted @0 :Bool;
  error @1 :Text;
  status @2 :RecordingStatus;
}
