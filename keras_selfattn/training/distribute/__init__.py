"""tf.distribute's needs: choosing a strategy (`strategy`), the workers' agreement
(`distributed`), the version-gated Keras fix (`keras_fix`), loss scaling
(`loss_scale`), per-replica XLA (`per_replica_xla`) and the TPU audit
(`tpu_audit`)."""
