package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum ibv_mw_type}: the kind of a memory window. */
public final class IbvMwType {
    /** Bound with {@code ibv_bind_mw}, valid on every QP of its PD. */
    public static final int TYPE_1 = 1;
    /** Bound by an {@link IbvWrOpcode#BIND_MW} work request, valid on the QP that bound it only. */
    public static final int TYPE_2 = 2;

    private IbvMwType() {
    }
}
