package io.netty.contrib.channel.rdma.internal.verbs;

/** The {@code enum ibv_device_cap_flags} bits of {@code ibv_device_attr.device_cap_flags} the bindings test. */
public final class IbvDeviceCapFlags {
    public static final int MEM_WINDOW = 1 << 17;
    public static final int MEM_WINDOW_TYPE_2A = 1 << 23;
    public static final int MEM_WINDOW_TYPE_2B = 1 << 24;

    private IbvDeviceCapFlags() {
    }
}
