//! A polled message copied into the service's own record.

use rdkafka::message::{BorrowedMessage, Message};

use crate::batch::InboundRecord;
use crate::event::Header;

/// Copies a polled message into an owned record.
pub fn to_record(message: &BorrowedMessage<'_>) -> InboundRecord {
    InboundRecord {
        topic: message.topic().to_owned(),
        partition: message.partition(),
        offset: message.offset(),
        timestamp: message.timestamp().to_millis(),
        key: message.key().map(<[u8]>::to_vec),
        payload: message.payload().map(<[u8]>::to_vec),
        headers: headers_of(message),
    }
}

/// A record's headers, keys and values as the producer sent them. A key
/// that is not UTF-8 becomes `hex:` and its bytes in hex, as the parked row
/// stores a key jsonb cannot hold (rust-rdkafka's header iterator panics on
/// such a key, so they are read from librdkafka directly).
fn headers_of(message: &BorrowedMessage<'_>) -> Vec<Header> {
    use rdkafka::bindings as rdsys;
    let mut headers = Vec::new();
    let mut native: *mut rdsys::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: the message is live for the whole call, and the headers it
    // owns with it; every pointer read here is copied before returning.
    unsafe {
        if rdsys::rd_kafka_message_headers(message.ptr(), &mut native)
            != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
            || native.is_null()
        {
            return headers;
        }
        for index in 0..rdsys::rd_kafka_header_cnt(native) {
            let mut name: *const std::os::raw::c_char = std::ptr::null();
            let mut value: *const std::os::raw::c_void = std::ptr::null();
            let mut size = 0usize;
            let found =
                rdsys::rd_kafka_header_get_all(native, index, &mut name, &mut value, &mut size);
            if found != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
                continue;
            }
            let key = std::ffi::CStr::from_ptr(name).to_bytes();
            let value = (!value.is_null())
                .then(|| std::slice::from_raw_parts(value.cast::<u8>(), size).to_vec());
            headers.push(Header {
                key: crate::parked::header_key_text(key),
                value,
            });
        }
    }
    headers
}
