package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_port_attr}: filled by {@code ibv_query_port}. */
final class IbvPortAttr {
    static final GroupLayout LAYOUT = struct("ibv_port_attr",
            U32.withName("state"),
            U32.withName("max_mtu"),
            U32.withName("active_mtu"),
            U32.withName("gid_tbl_len"),
            U32.withName("port_cap_flags"),
            U32.withName("max_msg_sz"),
            U32.withName("bad_pkey_cntr"),
            U32.withName("qkey_viol_cntr"),
            U16.withName("pkey_tbl_len"),
            U16.withName("lid"),
            U16.withName("sm_lid"),
            U8.withName("lmc"),
            U8.withName("max_vl_num"),
            U8.withName("sm_sl"),
            U8.withName("subnet_timeout"),
            U8.withName("init_type_reply"),
            U8.withName("active_width"),
            U8.withName("active_speed"),
            U8.withName("phys_state"),
            U8.withName("link_layer"),
            U8.withName("flags"),
            U16.withName("port_cap_flags2"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle STATE = field(LAYOUT, "state");
    static final VarHandle MAX_MTU = field(LAYOUT, "max_mtu");
    static final VarHandle ACTIVE_MTU = field(LAYOUT, "active_mtu");
    static final VarHandle GID_TBL_LEN = field(LAYOUT, "gid_tbl_len");
    static final VarHandle MAX_MSG_SZ = field(LAYOUT, "max_msg_sz");
    static final VarHandle PKEY_TBL_LEN = field(LAYOUT, "pkey_tbl_len");
    static final VarHandle LID = field(LAYOUT, "lid");
    static final VarHandle LINK_LAYER = field(LAYOUT, "link_layer");

    private IbvPortAttr() {
    }
}
