//! The wire format between enka and `enka_worker.py`: each message is a
//! 4-byte big-endian length and a UTF-8 JSON object.

use std::io::{self, Read, Write};

/// Largest message accepted from the worker, so a runaway plugin result
/// fails its task instead of exhausting enka's memory.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Writes one message.
pub fn write_frame(out: &mut impl Write, message: &serde_json::Value) -> io::Result<()> {
    let body = serde_json::to_vec(message).map_err(io::Error::other)?;
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "request over 4 GiB"))?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    out.write_all(&frame)?;
    out.flush()
}

/// Reads one message; `Ok(None)` at a clean end of stream.
pub fn read_frame(input: &mut impl Read) -> io::Result<Option<serde_json::Value>> {
    let mut head = [0u8; 4];
    match input.read_exact(&mut head) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    let len = u32::from_be_bytes(head) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a worker message of {len} bytes is over the limit of {MAX_FRAME_BYTES}"),
        ));
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let message = serde_json::json!({"op": "run", "args": {"path": "/tmp/ü"}});
        let mut buffer = Vec::new();
        write_frame(&mut buffer, &message).unwrap();
        assert_eq!(&buffer[..4], &((buffer.len() - 4) as u32).to_be_bytes());
        let mut reader = buffer.as_slice();
        assert_eq!(read_frame(&mut reader).unwrap(), Some(message));
        assert_eq!(read_frame(&mut reader).unwrap(), None);
    }

    #[test]
    fn oversized_and_broken_frames_are_errors() {
        let mut reader: &[u8] = &(u32::MAX).to_be_bytes();
        assert_eq!(
            read_frame(&mut reader).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let mut frame = 3u32.to_be_bytes().to_vec();
        frame.extend_from_slice(b"{no");
        let mut reader = frame.as_slice();
        assert_eq!(
            read_frame(&mut reader).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let mut truncated: &[u8] = &[0, 0, 0, 9, b'{'];
        assert!(read_frame(&mut truncated).is_err());
    }
}
