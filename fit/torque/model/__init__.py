"""The torque route's equations: the rigid body's regressor, the joint-local columns, MuJoCo's soft friction."""
