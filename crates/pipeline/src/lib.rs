//! The slow path: tables of prioritised rules looked up by tuple-space search.
//! Classifying a key records every bit it examined, producing a megaflow.
