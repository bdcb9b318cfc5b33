package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_device_attr}: filled by {@code ibv_query_device}. */
final class IbvDeviceAttr {
    static final GroupLayout LAYOUT = struct("ibv_device_attr",
            bytes("fw_ver", 64),
            BE64.withName("node_guid"),
            BE64.withName("sys_image_guid"),
            U64.withName("max_mr_size"),
            U64.withName("page_size_cap"),
            U32.withName("vendor_id"),
            U32.withName("vendor_part_id"),
            U32.withName("hw_ver"),
            U32.withName("max_qp"),
            U32.withName("max_qp_wr"),
            U32.withName("device_cap_flags"),
            U32.withName("max_sge"),
            U32.withName("max_sge_rd"),
            U32.withName("max_cq"),
            U32.withName("max_cqe"),
            U32.withName("max_mr"),
            U32.withName("max_pd"),
            U32.withName("max_qp_rd_atom"),
            U32.withName("max_ee_rd_atom"),
            U32.withName("max_res_rd_atom"),
            U32.withName("max_qp_init_rd_atom"),
            U32.withName("max_ee_init_rd_atom"),
            U32.withName("atomic_cap"),
            U32.withName("max_ee"),
            U32.withName("max_rdd"),
            U32.withName("max_mw"),
            U32.withName("max_raw_ipv6_qp"),
            U32.withName("max_raw_ethy_qp"),
            U32.withName("max_mcast_grp"),
            U32.withName("max_mcast_qp_attach"),
            U32.withName("max_total_mcast_qp_attach"),
            U32.withName("max_ah"),
            U32.withName("max_fmr"),
            U32.withName("max_map_per_fmr"),
            U32.withName("max_srq"),
            U32.withName("max_srq_wr"),
            U32.withName("max_srq_sge"),
            U16.withName("max_pkeys"),
            U8.withName("local_ca_ack_delay"),
            U8.withName("phys_port_cnt"));
    static final long SIZE = LAYOUT.byteSize();
    static final long FW_VER_OFFSET = offset(LAYOUT, "fw_ver");
    static final VarHandle NODE_GUID = field(LAYOUT, "node_guid");
    static final VarHandle MAX_MR_SIZE = field(LAYOUT, "max_mr_size");
    static final VarHandle VENDOR_ID = field(LAYOUT, "vendor_id");
    static final VarHandle VENDOR_PART_ID = field(LAYOUT, "vendor_part_id");
    static final VarHandle MAX_QP = field(LAYOUT, "max_qp");
    static final VarHandle MAX_QP_WR = field(LAYOUT, "max_qp_wr");
    static final VarHandle DEVICE_CAP_FLAGS = field(LAYOUT, "device_cap_flags");
    static final VarHandle MAX_SGE = field(LAYOUT, "max_sge");
    static final VarHandle MAX_CQ = field(LAYOUT, "max_cq");
    static final VarHandle MAX_CQE = field(LAYOUT, "max_cqe");
    static final VarHandle MAX_MR = field(LAYOUT, "max_mr");
    static final VarHandle MAX_PD = field(LAYOUT, "max_pd");
    static final VarHandle MAX_QP_RD_ATOM = field(LAYOUT, "max_qp_rd_atom");
    static final VarHandle MAX_QP_INIT_RD_ATOM = field(LAYOUT, "max_qp_init_rd_atom");
    static final VarHandle MAX_MW = field(LAYOUT, "max_mw");
    static final VarHandle MAX_SRQ = field(LAYOUT, "max_srq");
    static final VarHandle MAX_SRQ_WR = field(LAYOUT, "max_srq_wr");
    static final VarHandle MAX_SRQ_SGE = field(LAYOUT, "max_srq_sge");
    static final VarHandle PHYS_PORT_CNT = field(LAYOUT, "phys_port_cnt");

    private IbvDeviceAttr() {
    }
}
