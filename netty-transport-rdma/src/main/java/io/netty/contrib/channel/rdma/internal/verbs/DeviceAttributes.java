package io.netty.contrib.channel.rdma.internal.verbs;

/**
 * The parts of {@code struct ibv_device_attr} the transport sizes its resources by. {@code deviceCapFlags} holds
 * the {@link IbvDeviceCapFlags} bits.
 */
public record DeviceAttributes(String fwVer, long nodeGuid, int vendorId, int vendorPartId, long maxMrSize,
                               int maxQp, int maxQpWr, int maxSge, int maxCq, int maxCqe, int maxMr, int maxPd,
                               int maxQpRdAtom, int maxQpInitRdAtom, int maxSrq, int maxSrqWr, int maxSrqSge,
                               int physPortCnt, int deviceCapFlags, int maxMw) {

    /**
     * Whether the device binds type 2B memory windows ({@code IBV_DEVICE_MEM_WINDOW_TYPE_2B}, {@code max_mw > 0}):
     * windows bound by a work request to one QP, so an rkey handed to a peer is valid on that connection only.
     */
    public boolean supportsType2Windows() {
        return (deviceCapFlags & IbvDeviceCapFlags.MEM_WINDOW_TYPE_2B) != 0 && maxMw > 0;
    }
}
